package names

import "testing"

func TestProviderIDRoundTrip(t *testing.T) {
	id := ProviderID("nl-rmd-dc01-001", 42)
	if id != "vco://nl-rmd-dc01-001/42" {
		t.Fatalf("ProviderID = %q", id)
	}
	loc, vm, err := ParseProviderID(id)
	if err != nil || loc != "nl-rmd-dc01-001" || vm != 42 {
		t.Fatalf("ParseProviderID(%q) = %q, %d, %v", id, loc, vm, err)
	}
	for _, bad := range []string{"", "vco://", "vco://loc", "vco:///1", "vco://loc/0", "vco://loc/01", "aws://loc/1", "vco://loc/x"} {
		if _, _, err := ParseProviderID(bad); err == nil {
			t.Errorf("ParseProviderID(%q) accepted", bad)
		}
	}
}

func FuzzParseProviderID(f *testing.F) {
	f.Add("vco://nl-rmd-dc01-001/42")
	f.Fuzz(func(t *testing.T, s string) {
		loc, vm, err := ParseProviderID(s)
		if err == nil && ProviderID(loc, vm) != s {
			t.Fatalf("%q parses to %q %d which renders differently", s, loc, vm)
		}
	})
}

func TestNames(t *testing.T) {
	if got := Cloudspace("ns", "c1", PrimarySite); got != "capvco_ns_c1_primary" {
		t.Errorf("Cloudspace = %q", got)
	}
	if got := APIServer("ns", "c1"); got != "capvco_ns_c1_apiserver" {
		t.Errorf("APIServer = %q", got)
	}
}
