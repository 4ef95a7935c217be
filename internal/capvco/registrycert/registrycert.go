// Package registrycert keeps a cluster's registry certificate in the platform's SSL
// certificate store: uploaded under its domain when absent, replaced when the stored one is a
// different certificate, deleted at teardown only when the stored one is still this cluster's.
// Writing the store is operator-privileged: a per-cluster customer credential gets 403, which
// the caller reports as a condition.
package registrycert

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/capx-io/capx/internal/vco"
)

// API is what this package calls.
type API interface {
	GetCertificate(ctx context.Context, domain string) (vco.Certificate, error)
	UploadCertificate(ctx context.Context, certPEM, keyPEM string) (vco.Certificate, error)
	ReplaceCertificate(ctx context.Context, domain, certPEM, keyPEM string) (vco.Certificate, error)
	DeleteCertificate(ctx context.Context, domain string) error
}

// Certificate is a parsed registry certificate. Its key never leaves this struct except to the
// store, and String never shows it.
type Certificate struct {
	// Domain is what the store files it under: the first DNS name, else the common name.
	Domain   string
	NotAfter time.Time
	// Fingerprint is the SHA-256 of the leaf certificate, hex.
	Fingerprint string
	certPEM     string
	keyPEM      string
}

// String names the certificate without its key.
func (c Certificate) String() string {
	return fmt.Sprintf("certificate for %s (sha256 %s, expires %s)", c.Domain, c.Fingerprint[:16], c.NotAfter.UTC().Format(time.DateOnly))
}

// ErrInvalid is wrapped by Parse's errors.
var ErrInvalid = errors.New("invalid registry certificate")

// Parse reads a kubernetes.io/tls Secret's tls.crt and tls.key. Errors never quote the key.
func Parse(certPEM, keyPEM []byte) (Certificate, error) {
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return Certificate{}, fmt.Errorf("%w: the Secret needs the keys tls.crt and tls.key (a kubernetes.io/tls Secret)", ErrInvalid)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return Certificate{}, fmt.Errorf("%w: tls.crt and tls.key are not a matching PEM certificate and private key", ErrInvalid)
	}
	leaf, err := leafOf(string(certPEM))
	if err != nil {
		return Certificate{}, err
	}
	domain := leaf.Subject.CommonName
	if len(leaf.DNSNames) > 0 {
		domain = leaf.DNSNames[0]
	}
	if domain == "" {
		return Certificate{}, fmt.Errorf("%w: the certificate names no DNS name or common name to file it under", ErrInvalid)
	}
	return Certificate{Domain: strings.ToLower(domain), NotAfter: leaf.NotAfter, Fingerprint: fingerprint(leaf),
		certPEM: string(certPEM), keyPEM: string(keyPEM)}, nil
}

func leafOf(chain string) (*x509.Certificate, error) {
	block, _ := pem.Decode([]byte(chain))
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: tls.crt does not start with a PEM CERTIFICATE block", ErrInvalid)
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: tls.crt: %v", ErrInvalid, err)
	}
	return leaf, nil
}

func fingerprint(c *x509.Certificate) string { return fmt.Sprintf("%x", sha256.Sum256(c.Raw)) }

// Action is what Ensure did.
type Action string

const (
	Unchanged Action = "unchanged"
	Uploaded  Action = "uploaded"
	Replaced  Action = "replaced"
)

// Ensure makes the store hold c under its domain.
func Ensure(ctx context.Context, api API, c Certificate) (Action, error) {
	stored, err := api.GetCertificate(ctx, c.Domain)
	switch {
	case errors.Is(err, vco.ErrNotFound):
		if _, err := api.UploadCertificate(ctx, c.certPEM, c.keyPEM); err != nil {
			return "", fmt.Errorf("upload the %s: %w", c, err)
		}
		logr.FromContextOrDiscard(ctx).Info("Uploaded registry certificate to the SSL certificate store", "domain", c.Domain, "sha256", c.Fingerprint)
		return Uploaded, nil
	case err != nil:
		return "", fmt.Errorf("read the store's certificate for %s: %w", c.Domain, err)
	}
	if storedFingerprint(stored) == c.Fingerprint {
		return Unchanged, nil
	}
	if _, err := api.ReplaceCertificate(ctx, c.Domain, c.certPEM, c.keyPEM); err != nil {
		return "", fmt.Errorf("replace the store's certificate for %s with the %s: %w", c.Domain, c, err)
	}
	logr.FromContextOrDiscard(ctx).Info("Replaced registry certificate in the SSL certificate store", "domain", c.Domain, "sha256", c.Fingerprint)
	return Replaced, nil
}

// Delete removes c's domain from the store if the stored certificate is c; a different one
// (another cluster's, or replaced by hand) is left alone. It reports whether it deleted.
func Delete(ctx context.Context, api API, c Certificate) (bool, error) {
	stored, err := api.GetCertificate(ctx, c.Domain)
	if errors.Is(err, vco.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the store's certificate for %s: %w", c.Domain, err)
	}
	if storedFingerprint(stored) != c.Fingerprint {
		return false, nil
	}
	if err := api.DeleteCertificate(ctx, c.Domain); err != nil && !errors.Is(err, vco.ErrNotFound) {
		return false, fmt.Errorf("delete the store's certificate for %s: %w", c.Domain, err)
	}
	logr.FromContextOrDiscard(ctx).Info("Deleted registry certificate from the SSL certificate store", "domain", c.Domain, "sha256", c.Fingerprint)
	return true, nil
}

// storedFingerprint is the stored leaf's fingerprint ("" when the store shows no chain).
func storedFingerprint(c vco.Certificate) string {
	if len(c.Chain) == 0 {
		return ""
	}
	leaf, err := leafOf(c.Chain[0].Content)
	if err != nil {
		return ""
	}
	return fingerprint(leaf)
}
