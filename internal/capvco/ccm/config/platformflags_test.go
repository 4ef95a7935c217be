package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestPlatformFlagsRoundTrip: the arguments the manifests write are read back by the add-on's
// own flags into the same policy, and a host that could not be passed on is refused by name.
func TestPlatformFlagsRoundTrip(t *testing.T) {
	in := Platform{AllowHTTP: true, AllowedHosts: []string{"VCOSim.capvco-system.svc.:8080", "10.0.0.7", "[::1]:8443"}}
	args, err := PlatformArgs(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--allow-http", "--allowed-hosts=vcosim.capvco-system.svc:8080", "--allowed-hosts=10.0.0.7", "--allowed-hosts=[::1]:8443"}
	if !slices.Equal(args, want) {
		t.Fatalf("args %q, want %q", args, want)
	}
	var out Platform
	fs := pflag.NewFlagSet("addon", pflag.ContinueOnError)
	BindPlatformFlags(fs, &out)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	opts, err := FlagClientOptions(out)
	if err != nil {
		t.Fatal(err)
	}
	if !opts.AllowHTTP || !slices.Equal(opts.AllowedHosts, []string{"vcosim.capvco-system.svc:8080", "10.0.0.7", "[::1]:8443"}) || opts.Flags != PlatformFlags {
		t.Fatalf("read back as %+v", opts)
	}
	if args, err := PlatformArgs(Platform{}); err != nil || len(args) != 0 {
		t.Fatalf("no policy: %q, %v", args, err)
	}
	for _, bad := range []string{"https://vco.example.com", "a b", "host,other"} {
		_, err := PlatformArgs(Platform{AllowedHosts: []string{bad}})
		if err == nil || !strings.Contains(err.Error(), "--allowed-hosts") {
			t.Errorf("%q: %v", bad, err)
		}
		if _, err := FlagClientOptions(Platform{AllowedHosts: []string{bad}}); err == nil && !strings.Contains(bad, ",") {
			t.Errorf("FlagClientOptions(%q) accepted it", bad)
		}
	}
}
