package vco

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzCABundle: a credential Secret's caBundle is a tenant's input. Whatever it holds, reading it
// never panics, an accepted bundle always gives a transport, and a refusal names the key.
func FuzzCABundle(f *testing.F) {
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIA==\n-----END EC PRIVATE KEY-----\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := parseCABundle(b)
		if err != nil {
			if !strings.Contains(err.Error(), SecretKeyCABundle) {
				t.Fatalf("the refusal does not name %q: %v", SecretKeyCABundle, err)
			}
			return
		}
		if _, err := withCABundle(&http.Client{}, b); err != nil {
			t.Fatalf("an accepted bundle gives no transport: %v", err)
		}
	})
}
