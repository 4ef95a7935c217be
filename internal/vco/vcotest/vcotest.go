// Package vcotest is what tests of whitesky.cloud callers share: clients of a simulator's
// seeded principals, and self-signed certificates for the SSL certificate store.
package vcotest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// Client is a client of sim with a token of principal (e.g. vcosim.SeedClusterPrinc, what a
// cluster holds, or vcosim.SeedOperatorPrinc).
func Client(t testing.TB, sim *vcosim.Server, principal string) *vco.Client {
	t.Helper()
	tok, err := sim.Token(principal, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := vco.New(vco.Credentials{URL: sim.APIURL(), Customer: vcosim.SeedCustomer, JWT: tok}, vco.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// SelfSigned makes a PEM certificate (common name cn, DNS names dns, valid for 90 days, a new
// serial each call) and its PEM key.
func SelfSigned(t testing.TB, cn string, dns ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(90 * 24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}
