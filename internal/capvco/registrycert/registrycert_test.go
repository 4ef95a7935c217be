package registrycert_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/capx-io/capx/internal/capvco/registrycert"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

func selfSigned(t testing.TB, cn string, dns ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
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

func TestParse(t *testing.T) {
	crt, key := selfSigned(t, "ignored.example", "Registry.Example.COM", "alt.example")
	c, err := registrycert.Parse(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	if c.Domain != "registry.example.com" {
		t.Errorf("domain %q, want the first DNS name, lower case", c.Domain)
	}
	if s := c.String(); !strings.Contains(s, "registry.example.com") || strings.Contains(s, "PRIVATE") {
		t.Errorf("String() = %q", s)
	}
	cnOnly, cnKey := selfSigned(t, "cn.example")
	if c, err := registrycert.Parse(cnOnly, cnKey); err != nil || c.Domain != "cn.example" {
		t.Errorf("common name only: %+v, %v", c, err)
	}
	_, otherKey := selfSigned(t, "other.example")
	noName, noNameKey := selfSigned(t, "")
	for name, tc := range map[string]struct {
		crt, key []byte
		want     string
	}{
		"no key":         {crt, nil, "needs the keys tls.crt and tls.key"},
		"no certificate": {nil, key, "needs the keys tls.crt and tls.key"},
		"mismatched key": {crt, otherKey, "not a matching PEM certificate and private key"},
		"garbage":        {[]byte("hello"), []byte("world"), "not a matching PEM"},
		"no name":        {noName, noNameKey, "names no DNS name or common name"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := registrycert.Parse(tc.crt, tc.key)
			if !errors.Is(err, registrycert.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrInvalid with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), string(tc.key)) && len(tc.key) > 0 {
				t.Errorf("the error shows the key: %v", err)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	crt, key := selfSigned(f, "fuzz.example", "fuzz.example")
	f.Add(crt, key)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), key)
	f.Fuzz(func(t *testing.T, crt, key []byte) {
		c, err := registrycert.Parse(crt, key)
		if err != nil {
			if !errors.Is(err, registrycert.ErrInvalid) {
				t.Fatalf("error is not ErrInvalid: %v", err)
			}
			return
		}
		if c.Domain == "" || len(c.Fingerprint) != 64 {
			t.Fatalf("parsed without a domain or fingerprint: %+v", c)
		}
	})
}

// TestEnsureAndDelete runs against the simulator: upload, unchanged, replace on renewal,
// 403 for the cluster's credential, and a delete that leaves another certificate alone.
func TestEnsureAndDelete(t *testing.T) {
	ctx := context.Background()
	sim := vcosim.NewTestServer(t, vcosim.Options{})
	client := func(principal string) *vco.Client {
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
	op, cluster := client(vcosim.SeedOperatorPrinc), client(vcosim.SeedClusterPrinc)
	parse := func(crt, key []byte) registrycert.Certificate {
		c, err := registrycert.Parse(crt, key)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := parse(selfSigned(t, "registry.example", "registry.example"))
	renewed := parse(selfSigned(t, "registry.example", "registry.example"))

	if _, err := registrycert.Ensure(ctx, cluster, first); !errors.Is(err, vco.ErrForbidden) {
		t.Fatalf("the cluster's credential wrote the store: %v", err)
	}
	for i, want := range []registrycert.Action{registrycert.Uploaded, registrycert.Unchanged} {
		got, err := registrycert.Ensure(ctx, op, first)
		if err != nil || got != want {
			t.Fatalf("Ensure #%d = %s, %v; want %s", i+1, got, err, want)
		}
	}
	if got, err := registrycert.Ensure(ctx, op, renewed); err != nil || got != registrycert.Replaced {
		t.Fatalf("renewed: %s, %v", got, err)
	}
	if deleted, err := registrycert.Delete(ctx, op, first); err != nil || deleted {
		t.Fatalf("deleted a certificate that is no longer ours: %v, %v", deleted, err)
	}
	if deleted, err := registrycert.Delete(ctx, op, renewed); err != nil || !deleted {
		t.Fatalf("delete ours: %v, %v", deleted, err)
	}
	if deleted, err := registrycert.Delete(ctx, op, renewed); err != nil || deleted {
		t.Fatalf("delete again: %v, %v", deleted, err)
	}
	if n := len(sim.Snapshot().Certificates); n != 0 {
		t.Errorf("%d certificates left", n)
	}
}
