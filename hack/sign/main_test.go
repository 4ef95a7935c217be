package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSignVerify: a generated key signs, the public key verifies, a changed file or another
// key fails; and openssl, as a user without cosign, verifies the same signature.
func TestSignVerify(t *testing.T) {
	dir := t.TempDir()
	if err := generate(dir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "signing.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("signing.key: %v %v, want mode 0600", fi, err)
	}
	f := filepath.Join(dir, "checksums.txt")
	if err := os.WriteFile(f, []byte("abc  file.tar.gz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := signFiles(filepath.Join(dir, "signing.key"), []string{f}); err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(dir, "signing.pub")
	if err := verifyFiles(pub, []string{f}); err != nil {
		t.Errorf("verify: %v", err)
	}
	if openssl, err := exec.LookPath("openssl"); err == nil {
		b64, _ := os.ReadFile(f + ".sig")
		der := filepath.Join(dir, "sig.der")
		out, err := exec.Command("sh", "-c", "base64 -d < "+f+".sig > "+der+" && "+openssl+" dgst -sha256 -verify "+pub+" -signature "+der+" "+f).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Verified OK") {
			t.Errorf("openssl: %v: %s (signature %s)", err, out, b64)
		}
	} else {
		t.Fatal("openssl is needed to check the signature as a user would (Debian: openssl)")
	}
	other := t.TempDir()
	if err := generate(other); err != nil {
		t.Fatal(err)
	}
	if err := verifyFiles(filepath.Join(other, "signing.pub"), []string{f}); err == nil {
		t.Error("another key verifies")
	}
	if err := os.WriteFile(f, []byte("abd  file.tar.gz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := verifyFiles(pub, []string{f}); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("a changed file: %v", err)
	}
	if err := verifyFiles(pub, []string{filepath.Join(dir, "unsigned")}); err == nil {
		t.Error("an unsigned file verifies")
	}
}
