package install

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// ServingCert is what cert-manager would have issued for a webhook Service: a CA (for the
// caBundle fields) and a serving certificate with its key (for the Secret the manager mounts).
type ServingCert struct {
	CA, Cert, Key []byte
}

// servingCertFiles are the names in the Secret and on disk, as cert-manager writes them.
const (
	caFile   = "ca.crt"
	certFile = "tls.crt"
	keyFile  = "tls.key"
)

// LoadOrCreateServingCert returns the certificate kept in dir if it covers dnsNames, else
// creates a new CA and certificate there. Keeping them makes a repeated install, and the
// clusterctl repository built from them, stable.
func LoadOrCreateServingCert(dir string, dnsNames []string) (*ServingCert, error) {
	if c, err := loadServingCert(dir); err == nil && c.covers(dnsNames) {
		return c, nil
	}
	c, err := newServingCert(dnsNames)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{caFile: c.CA, certFile: c.Cert, keyFile: c.Key} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func loadServingCert(dir string) (*ServingCert, error) {
	c := &ServingCert{}
	var err error
	for name, into := range map[string]*[]byte{caFile: &c.CA, certFile: &c.Cert, keyFile: &c.Key} {
		if *into, err = os.ReadFile(filepath.Join(dir, name)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// covers reports whether the certificate names every DNS name and is valid for another day.
func (c *ServingCert) covers(dnsNames []string) bool {
	block, _ := pem.Decode(c.Cert)
	if block == nil {
		return false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil || time.Now().Add(24*time.Hour).After(cert.NotAfter) {
		return false
	}
	for _, n := range dnsNames {
		if !slices.Contains(cert.DNSNames, n) {
			return false
		}
	}
	return true
}

func newServingCert(dnsNames []string) (*ServingCert, error) {
	if len(dnsNames) == 0 {
		return nil, errors.New("serving certificate: no DNS names")
	}
	now := time.Now().Add(-time.Hour)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "capx local webhook CA"},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("webhook CA: %w", err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: dnsNames[0]},
		DNSNames:     dnsNames,
		NotBefore:    now,
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("webhook serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	encode := func(typ string, b []byte) []byte {
		var buf bytes.Buffer
		_ = pem.Encode(&buf, &pem.Block{Type: typ, Bytes: b})
		return buf.Bytes()
	}
	return &ServingCert{
		CA:   encode("CERTIFICATE", caDER),
		Cert: encode("CERTIFICATE", der),
		Key:  encode("EC PRIVATE KEY", keyDER),
	}, nil
}
