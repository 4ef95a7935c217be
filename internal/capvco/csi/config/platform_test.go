package config

import (
	"strings"
	"testing"

	"github.com/capx-io/capx/internal/vco"
)

const plain = `
credentialsDir: /etc/capvco/credentials
cluster: {namespace: team-a, name: prod}
sites: [{name: primary, location: nl-rmd-dc01-001}]
encryption: {vaultMode: none}
`

// TestPlatform: the platform block is the client's endpoint policy, and refusals name its
// fields; a bad allow-list entry stops the file.
func TestPlatform(t *testing.T) {
	c, err := Parse([]byte(plain + "platform: {allowHTTP: true, allowedHosts: [vcosim.capvco-system.svc:8080]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	o := c.Platform.ClientOptions()
	if !o.AllowHTTP || len(o.AllowedHosts) != 1 || o.Flags.AllowedHosts != "platform.allowedHosts" {
		t.Fatalf("options %+v", o)
	}
	creds := vco.Credentials{URL: "http://vco.example.com/api/1", Customer: "acme", JWT: "eyJhbGciOiJIUzI1NiJ9.eyJleHAiOjQxMDI0NDQ4MDB9.c2ln"}
	if _, err := vco.New(creds, Platform{}.ClientOptions()); err == nil || !strings.Contains(err.Error(), "platform.allowHTTP") {
		t.Errorf("plain http without allowHTTP: %v", err)
	}
	if _, err := vco.New(creds, Platform{AllowHTTP: true}.ClientOptions()); err != nil {
		t.Errorf("plain http with allowHTTP: %v", err)
	}
	if _, err := Parse([]byte(plain + "platform: {allowedHosts: ['https://vco.example.com/']}\n")); err == nil || !strings.Contains(err.Error(), "platform.allowedHosts") {
		t.Errorf("a URL in allowedHosts: %v", err)
	}
}
