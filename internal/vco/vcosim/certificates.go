package vcosim

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"strings"
)

func (s *Sim) certificateRoutes() []*route {
	const base = "/customers/{customer_id}/certificates/ssl"
	return []*route{
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: base}, handle: s.listCertificates},
		{Route: Route{Method: http.MethodPost, Base: apiBase, Path: base, Body: true}, handle: s.uploadCertificate},
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: base + "/{domain}", Query: []string{"source"}}, handle: s.getCertificate},
		{Route: Route{Method: http.MethodPut, Base: apiBase, Path: base + "/{domain}", Body: true}, handle: s.replaceCertificate},
		{Route: Route{Method: http.MethodDelete, Base: apiBase, Path: base + "/{domain}", Query: []string{"source"}}, handle: s.deleteCertificate},
	}
}

const sourceStore = "CERTIFICATE_STORE"

func certKey(customer, source, domain string) string { return customer + "/" + source + "/" + domain }

func (s *Sim) wireCertificate(c *Certificate) map[string]any {
	status := "valid"
	if float64(s.opts.Now().Unix()) > c.ExpiresAt {
		status = "expired"
	}
	return map[string]any{"created_at": c.CreatedAt, "created_by": c.CreatedBy, "customer_id": c.Customer, "domain": c.Domain,
		"expires_at": c.ExpiresAt, "notified": false, "source": c.Source, "status": status}
}

func (s *Sim) listCertificates(c *call) (any, error) {
	cu, err := c.customerWith(PermRead)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, cert := range sortedValues(s.st.Certificates) {
		if cert.Customer == cu.ID {
			out = append(out, s.wireCertificate(cert))
		}
	}
	return list(out), nil
}

// parseCertificate checks a PEM chain and key and derives the domain and expiry, since the
// upload body carries neither.
func parseCertificate(crt, key string) (*x509.Certificate, error) {
	if _, err := tls.X509KeyPair([]byte(crt), []byte(key)); err != nil {
		return nil, badRequest("Bad Request: crt and key are not a matching PEM certificate and private key: %v", err)
	}
	block, _ := pem.Decode([]byte(crt))
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, badRequest("Bad Request: crt is not a valid certificate: %v", err)
	}
	return leaf, nil
}

func certDomain(leaf *x509.Certificate) string {
	if len(leaf.DNSNames) > 0 {
		return strings.ToLower(leaf.DNSNames[0])
	}
	return strings.ToLower(leaf.Subject.CommonName)
}

// certificateUpload reads and checks the {crt, key} body of an upload or a replace, after
// checking that the caller may write the store.
func (c *call) certificateUpload() (crt, key string, leaf *x509.Certificate, err error) {
	if err := c.requireCustomerAdmin("the SSL certificate store"); err != nil {
		return "", "", nil, err
	}
	var in struct {
		CRT string `json:"crt"`
		Key string `json:"key"`
	}
	if err := c.decode(&in); err != nil {
		return "", "", nil, err
	}
	if in.CRT == "" || in.Key == "" {
		return "", "", nil, &apiError{status: http.StatusBadRequest, message: "Input payload validation failed", fields: map[string]string{"crt": "crt and key are required"}}
	}
	leaf, err = parseCertificate(in.CRT, in.Key)
	return in.CRT, in.Key, leaf, err
}

// uploadCertificate writes the store, which a service credential may not do.
func (s *Sim) uploadCertificate(c *call) (any, error) {
	cu, err := c.customer()
	if err != nil {
		return nil, err
	}
	crt, key, leaf, err := c.certificateUpload()
	if err != nil {
		return nil, err
	}
	domain := certDomain(leaf)
	if s.st.Certificates[certKey(cu.ID, sourceStore, domain)] != nil {
		return nil, conflict("Conflict: a certificate for %s is already in the store; replace it with PUT", domain)
	}
	cert := &Certificate{ID: s.st.stringID("cert"), Customer: cu.ID, Domain: domain, Source: sourceStore, CRT: crt, Key: key,
		Issuer: leaf.Issuer.String(), CreatedAt: float64(c.now().Unix()), CreatedBy: c.principal.Name, ExpiresAt: float64(leaf.NotAfter.Unix())}
	s.st.Certificates[certKey(cu.ID, sourceStore, domain)] = cert
	return s.wireCertificate(cert), nil
}

func (s *Sim) certificateFor(c *call, source string) (*Customer, *Certificate, error) {
	cu, err := c.customer()
	if err != nil {
		return nil, nil, err
	}
	if source == "" {
		source = sourceStore
	}
	cert := s.st.Certificates[certKey(cu.ID, source, strings.ToLower(c.path("domain")))]
	if cert == nil {
		return nil, nil, notFound("NotFound: no %s certificate for %s", source, c.path("domain"))
	}
	return cu, cert, nil
}

func (s *Sim) getCertificate(c *call) (any, error) {
	if _, err := c.customerWith(PermRead); err != nil {
		return nil, err
	}
	_, cert, err := s.certificateFor(c, c.str("source"))
	if err != nil {
		return nil, err
	}
	out := s.wireCertificate(cert)
	out["crt"] = []map[string]string{{"issuer": cert.Issuer, "content": cert.CRT}}
	out["id"] = cert.ID
	return out, nil
}

func (s *Sim) replaceCertificate(c *call) (any, error) {
	if _, err := c.customer(); err != nil {
		return nil, err
	}
	_, cert, err := s.certificateFor(c, sourceStore)
	if err != nil {
		return nil, err
	}
	crt, key, leaf, err := c.certificateUpload()
	if err != nil {
		return nil, err
	}
	if d := certDomain(leaf); d != cert.Domain {
		return nil, badRequest("Bad Request: the certificate is for %s, not %s", d, cert.Domain)
	}
	cert.CRT, cert.Key, cert.Issuer, cert.ExpiresAt = crt, key, leaf.Issuer.String(), float64(leaf.NotAfter.Unix())
	return s.wireCertificate(cert), nil
}

func (s *Sim) deleteCertificate(c *call) (any, error) {
	if _, err := c.customer(); err != nil {
		return nil, err
	}
	if err := c.requireCustomerAdmin("the SSL certificate store"); err != nil {
		return nil, err
	}
	cu, cert, err := s.certificateFor(c, c.str("source"))
	if err != nil {
		return nil, err
	}
	delete(s.st.Certificates, certKey(cu.ID, cert.Source, cert.Domain))
	return nil, nil
}
