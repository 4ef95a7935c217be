package offsite_test

import (
	"strings"
	"testing"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"

	"github.com/capx-io/capx/internal/captf/offsite"
)

// FuzzParseKey: keys come from bucket listings; a key that parses is exactly the one Key
// writes for what it parsed to, so no key reaches another object's folder.
func FuzzParseKey(f *testing.F) {
	f.Add("p", "p/team-a/TerraformCluster/c/1-"+digest+".tfstate.gz")
	f.Add("", "team-a/TerraformMachine/m.0/0-"+digest+".tfstate.gz")
	f.Add("p", "p/../TerraformCluster/c/1-"+digest+".tfstate.gz")
	f.Fuzz(func(t *testing.T, prefix, key string) {
		pk, err := offsite.ParseKey(prefix, key)
		if err != nil {
			return
		}
		if got := offsite.Key(prefix, pk.Object, pk.Serial, pk.Digest); got != key {
			t.Fatalf("ParseKey(%q, %q) = %+v, which Key writes as %q", prefix, key, pk, got)
		}
		if strings.Contains(pk.Object.Namespace+pk.Object.Name, "/") || pk.Object.Namespace == ".." {
			t.Fatalf("%+v reaches another folder", pk)
		}
		switch pk.Object.Kind {
		case captfv1.KindCluster, captfv1.KindMachine, captfv1.KindMachinePool:
		default:
			t.Fatalf("kind %q", pk.Object.Kind)
		}
	})
}

// FuzzParseMetadata: metadata comes from the bucket; what parses has a serial, a lineage and a
// SHA-256, and never panics.
func FuzzParseMetadata(f *testing.F) {
	f.Add("v1", "7", "lin", digest, "3", "2026-12-02T08:00:00Z")
	f.Add("v2", "-1", "", "xyz", "many", "yesterday")
	f.Fuzz(func(t *testing.T, format, serial, lineage, sum, resources, takenAt string) {
		c, err := offsite.ParseMetadata(map[string]string{"captf-format": format, "Captf-Serial": serial, "Captf-Lineage": lineage,
			"Captf-Sha256": sum, "Captf-Resources": resources, "Captf-Taken-At": takenAt})
		if err != nil {
			return
		}
		if c.Serial < 0 || c.Lineage == "" || len(c.Digest) != 64 || c.Resources < 0 {
			t.Fatalf("accepted %+v", c)
		}
	})
}

// FuzzParseURL: the flag's value; what parses reads back as itself.
func FuzzParseURL(f *testing.F) {
	f.Add("https://o.example.com:8443/b/p/q?region=r")
	f.Add("http://127.0.0.1:9000/b")
	f.Fuzz(func(t *testing.T, raw string) {
		tg, err := offsite.ParseURL(raw)
		if err != nil {
			return
		}
		back, err := offsite.ParseURL(tg.String())
		if err != nil || back != tg {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", raw, tg, tg.String(), back, err)
		}
	})
}
