package config

import "testing"

// FuzzParse: a config file is operator input; Parse never panics, and what it accepts
// validates.
func FuzzParse(f *testing.F) {
	f.Add([]byte("credentialsDir: /etc/capvco/credentials\ncluster: {namespace: team-a, name: prod}\nsites: [{name: primary, location: nl-rmd-dc01-001}]\nencryption: {vaultMode: none}\n"))
	f.Add([]byte("cluster: {namespace: a, name: b}\nsites: [{name: primary, location: l}]\nencryption: {vaultMode: external, transit: {address: 'https://v:8200', key: k, tokenFile: /t}}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err == nil && c.Validate() != nil {
			t.Fatalf("accepted an invalid config: %s", b)
		}
	})
}
