package registrycert_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/capx-io/capx/internal/capvco/registrycert"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/internal/vco/vcotest"
)

func TestParse(t *testing.T) {
	crt, key := vcotest.SelfSigned(t, "ignored.example", "Registry.Example.COM", "alt.example")
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
	cnOnly, cnKey := vcotest.SelfSigned(t, "cn.example")
	if c, err := registrycert.Parse(cnOnly, cnKey); err != nil || c.Domain != "cn.example" {
		t.Errorf("common name only: %+v, %v", c, err)
	}
	_, otherKey := vcotest.SelfSigned(t, "other.example")
	noName, noNameKey := vcotest.SelfSigned(t, "")
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
	crt, key := vcotest.SelfSigned(f, "fuzz.example", "fuzz.example")
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
	op, cluster := vcotest.Client(t, sim, vcosim.SeedOperatorPrinc), vcotest.Client(t, sim, vcosim.SeedClusterPrinc)
	parse := func(crt, key []byte) registrycert.Certificate {
		c, err := registrycert.Parse(crt, key)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := parse(vcotest.SelfSigned(t, "registry.example", "registry.example"))
	renewed := parse(vcotest.SelfSigned(t, "registry.example", "registry.example"))

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
