package vco

import "context"

// The SSL certificate store is customer-wide and writes need an admin credential: a
// cluster's service credential gets ErrForbidden (CAPVCO's certCredentialSecretRef).

const (
	pathCertificates = "/customers/{customer_id}/certificates/ssl"
	pathCertificate  = pathCertificates + "/{domain}"
)

var (
	opListCertificates   = get("ListCertificates", pathCertificates)
	opUploadCertificate  = post("UploadCertificate", pathCertificates)
	opGetCertificate     = get("GetCertificate", pathCertificate)
	opReplaceCertificate = put("ReplaceCertificate", pathCertificate)
	opDeleteCertificate  = del("DeleteCertificate", pathCertificate)
)

// Certificate is an entry of the store; Chain is set by GetCertificate.
type Certificate struct {
	ID         string             `json:"id"`
	Domain     string             `json:"domain"`
	CustomerID string             `json:"customer_id"`
	Source     string             `json:"source"` // CERTIFICATE_STORE or LETS_ENCRYPT
	Status     string             `json:"status"` // valid, invalid, expired
	CreatedAt  float64            `json:"created_at"`
	CreatedBy  string             `json:"created_by"`
	ExpiresAt  float64            `json:"expires_at"`
	Chain      []CertificateChain `json:"crt"`
}

// CertificateChain is one PEM certificate of a chain.
type CertificateChain struct {
	Issuer  string `json:"issuer"`
	Content string `json:"content"`
}

type certificateBody struct {
	CRT string `json:"crt"`
	Key string `json:"key"`
}

// ListCertificates lists the store.
func (c *Client) ListCertificates(ctx context.Context) ([]Certificate, error) {
	var out resultList[Certificate]
	err := c.do(ctx, opListCertificates, call{}, &out)
	return out.Result, err
}

// UploadCertificate stores a PEM chain and key; the domain comes from the certificate.
func (c *Client) UploadCertificate(ctx context.Context, certPEM, keyPEM string) (Certificate, error) {
	var out Certificate
	err := c.do(ctx, opUploadCertificate, call{body: certificateBody{certPEM, keyPEM}}, &out)
	return out, err
}

// GetCertificate reads the store's certificate for a domain.
func (c *Client) GetCertificate(ctx context.Context, domain string) (Certificate, error) {
	var out Certificate
	err := c.do(ctx, opGetCertificate, call{path: args(domain)}, &out)
	return out, err
}

// ReplaceCertificate replaces the certificate of a domain (e.g. after renewal).
func (c *Client) ReplaceCertificate(ctx context.Context, domain, certPEM, keyPEM string) (Certificate, error) {
	var out Certificate
	err := c.do(ctx, opReplaceCertificate, call{path: args(domain), body: certificateBody{certPEM, keyPEM}}, &out)
	return out, err
}

// DeleteCertificate removes a domain's certificate from the store.
func (c *Client) DeleteCertificate(ctx context.Context, domain string) error {
	return c.do(ctx, opDeleteCertificate, call{path: args(domain)}, nil)
}
