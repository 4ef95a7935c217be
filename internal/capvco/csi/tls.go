package csi

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
)

// caTransport trusts the PEM bundle at path for the vault.
func caTransport(path string) (*http.Transport, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("encryption.transit.caFile: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("encryption.transit.caFile %s holds no PEM certificate", path)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return tr, nil
}
