package offsite_test

import (
	"errors"
	"strings"
	"testing"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"

	"github.com/capx-io/capx/internal/captf/offsite"
)

const digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestKeyRoundTrip(t *testing.T) {
	for _, prefix := range []string{"", "a", "/a/b/"} {
		o := offsite.Object{Namespace: "team-a", Kind: captfv1.KindMachinePool, Name: "pool.x"}
		key := offsite.Key(prefix, o, 42, digest)
		pk, err := offsite.ParseKey(prefix, key)
		if err != nil {
			t.Fatalf("prefix %q: %v", prefix, err)
		}
		if pk.Object != o || pk.Serial != 42 || pk.Digest != digest {
			t.Fatalf("prefix %q: %+v", prefix, pk)
		}
	}
}

func TestParseKeyRefuses(t *testing.T) {
	for name, key := range map[string]string{
		"other prefix":      "q/team-a/TerraformCluster/c/1-" + digest + ".tfstate.gz",
		"too deep":          "p/team-a/TerraformCluster/c/x/1-" + digest + ".tfstate.gz",
		"dot-dot namespace": "p/../TerraformCluster/c/1-" + digest + ".tfstate.gz",
		"unknown kind":      "p/team-a/Secret/c/1-" + digest + ".tfstate.gz",
		"upper-case name":   "p/team-a/TerraformCluster/C/1-" + digest + ".tfstate.gz",
		"leading zero":      "p/team-a/TerraformCluster/c/01-" + digest + ".tfstate.gz",
		"negative":          "p/team-a/TerraformCluster/c/-1-" + digest + ".tfstate.gz",
		"short digest":      "p/team-a/TerraformCluster/c/1-0123.tfstate.gz",
		"upper digest":      "p/team-a/TerraformCluster/c/1-" + strings.ToUpper(digest) + ".tfstate.gz",
		"other suffix":      "p/team-a/TerraformCluster/c/1-" + digest + ".json",
	} {
		if _, err := offsite.ParseKey("p", key); !errors.Is(err, offsite.ErrBadKey) {
			t.Errorf("%s: %q: got %v, want ErrBadKey", name, key, err)
		}
	}
}

func TestParseURL(t *testing.T) {
	tg, err := offsite.ParseURL("https://objects.example.com:8443/backups/mgmt/captf?region=ch-1")
	if err != nil {
		t.Fatal(err)
	}
	if tg.Endpoint != "objects.example.com:8443" || tg.Insecure || tg.Bucket != "backups" || tg.Prefix != "mgmt/captf" || tg.Region != "ch-1" {
		t.Fatalf("%+v", tg)
	}
	if back, err := offsite.ParseURL(tg.String()); err != nil || back != tg {
		t.Fatalf("String does not read back: %q %+v %v", tg.String(), back, err)
	}
	if tg, err := offsite.ParseURL("http://127.0.0.1:9000/bkt"); err != nil || !tg.Insecure || tg.Prefix != "" {
		t.Fatalf("loopback http: %+v %v", tg, err)
	}
	for _, bad := range []string{
		"http://objects.example.com/bkt", // the credential in the clear
		"s3://b/p", "https://objects.example.com", "https://objects.example.com/",
		"https://key:secret@objects.example.com/bkt", "https://objects.example.com/bkt?x=1", "https://objects.example.com/b",
		"https://objects.example.com/Bkt", "https://objects.example.com/bkt/p%00q",
		"https://objects.example.com/bkt/../c", "https://objects.example.com/bkt//c",
	} {
		if _, err := offsite.ParseURL(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseLocation(t *testing.T) {
	tg, _ := offsite.ParseURL("https://o.example.com/backups/p")
	if k, err := tg.ParseLocation("s3://backups/p/a/b"); err != nil || k != "p/a/b" {
		t.Fatalf("%q %v", k, err)
	}
	for _, bad := range []string{"s3://other/p/a", "backups/p/a", "s3://backups/", "s3://backups"} {
		if _, err := tg.ParseLocation(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
