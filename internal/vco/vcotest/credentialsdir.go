package vcotest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// CredentialsDir writes a mounted credential Secret's files for the simulator's seeded customer
// (its url, customer and jwt keys, as vco.CredentialsFromDir reads them) into dir, creating it,
// and returns dir.
func CredentialsDir(t testing.TB, dir, apiURL, token string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{vco.SecretKeyURL: apiURL, vco.SecretKeyCustomer: vcosim.SeedCustomer, vco.SecretKeyJWT: token} {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
