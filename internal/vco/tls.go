package vco

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
)

// SecretKeyCABundle is the credential Secret key of the PEM CA certificates that sign the API's
// and the IAM's TLS certificates, for a whitesky.cloud installation behind a private CA. They are
// trusted in addition to the system's roots (the release image's /etc/ssl/certs), and only for
// that credential's own connections: a tenant's bundle never applies to another Secret's client.
const SecretKeyCABundle = "caBundle"

// ErrUntrustedCertificate marks a TLS handshake whose server certificate did not verify. No
// retry can help, so the client returns it at once.
var ErrUntrustedCertificate = errors.New("the server's TLS certificate is not trusted")

// parseCABundle reads a caBundle value: PEM CERTIFICATE blocks only, at least one.
func parseCABundle(b []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%q holds a PEM %q block: give CA certificates only (-----BEGIN CERTIFICATE-----)", SecretKeyCABundle, blk.Type)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%q: certificate %d does not parse: %v", SecretKeyCABundle, len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%q holds no PEM certificate (-----BEGIN CERTIFICATE-----)", SecretKeyCABundle)
	}
	return certs, nil
}

// withCABundle returns a client whose transport trusts the bundle besides the system's roots.
// It needs an *http.Transport to extend: the client's own, or a caller's.
func withCABundle(hc *http.Client, bundle []byte) (*http.Client, error) {
	certs, err := parseCABundle(bundle)
	if err != nil {
		return nil, err
	}
	base, ok := hc.Transport.(*http.Transport)
	if hc.Transport == nil {
		base, ok = http.DefaultTransport.(*http.Transport)
	}
	if !ok {
		return nil, fmt.Errorf("%q needs the client's own HTTP transport, and Options.HTTPClient has a %T", SecretKeyCABundle, hc.Transport)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	for _, c := range certs {
		pool.AddCert(c)
	}
	t := base.Clone()
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	t.TLSClientConfig.RootCAs = pool
	out := *hc
	out.Transport = t
	return &out, nil
}

// untrustedCertificate turns a failed certificate check into an error that says what to do;
// any other error gives nil.
func untrustedCertificate(err error) error {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("%w: it is signed by a certificate authority this program does not trust (%v); "+
			"if the API or IAM uses a private CA, put that CA's PEM certificate under the credential Secret's %q key",
			ErrUntrustedCertificate, unknown, SecretKeyCABundle)
	case errors.As(err, &host):
		return fmt.Errorf("%w: %v; the credential's URL must name a host the certificate is for", ErrUntrustedCertificate, host)
	case errors.As(err, &invalid):
		return fmt.Errorf("%w: %v", ErrUntrustedCertificate, invalid)
	}
	return nil
}
