//go:build release

package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSignatures checks the snapshot's signatures as a user without cosign would: openssl,
// the public key, each file and its .sig (docs/release.md). checksums.txt covers every archive
// and SBOM, images.json every image's index digest; the krew manifests and the clusterctl files
// are signed themselves. A changed file must fail the same check.
func TestSignatures(t *testing.T) {
	s := loadSnapshot(t)
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Fatal("openssl is needed to check the signatures as a user would: hack/install-deps.sh installs it")
	}
	pub, files := signedFiles(t, s)
	verify := func(f string) ([]byte, error) {
		der := filepath.Join(t.TempDir(), "sig.der")
		return exec.Command("sh", "-c", `base64 -d < "$1.sig" > "$2" && "$3" dgst -sha256 -verify "$4" -signature "$2" "$1"`,
			"verify", f, der, openssl, pub).CombinedOutput()
	}
	for _, f := range files {
		if out, err := verify(f); err != nil {
			t.Errorf("%s: %v: %s", f, err, out)
		}
	}
	// The same check on a copy with one byte more fails.
	if out, err := verify(changedCopy(t, files[0])); err == nil {
		t.Errorf("a changed checksums.txt verifies: %s", out)
	}
}

// TestSignaturesCosign checks the same signatures with cosign (bin/cosign, built by make
// release-tools from github.com/sigstore/cosign/v3), as docs/release.md tells users:
// verify-blob with the public key and --insecure-ignore-tlog=true, since a signature made
// offline is in no transparency log. A changed file must fail.
func TestSignaturesCosign(t *testing.T) {
	s := loadSnapshot(t)
	cosign := filepath.Join(s.root, "bin", "cosign")
	if _, err := os.Stat(cosign); err != nil {
		t.Fatalf("%v: make release-tools builds cosign (hack/toolchain.sh release)", err)
	}
	pub, files := signedFiles(t, s)
	verify := func(f string) ([]byte, error) {
		cmd := exec.Command(cosign, "verify-blob", "--key", pub, "--insecure-ignore-tlog=true", "--signature", f+".sig", f)
		// Offline: with the key and no transparency log cosign needs no network, and it must
		// not find a user's cosign settings either.
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "TUF_ROOT="+t.TempDir())
		return cmd.CombinedOutput()
	}
	for _, f := range files {
		if out, err := verify(f); err != nil || !strings.Contains(string(out), "Verified OK") {
			t.Errorf("cosign verify-blob %s: %v: %s", f, err, out)
		}
	}
	if out, err := verify(changedCopy(t, files[0])); err == nil {
		t.Errorf("cosign verifies a changed checksums.txt: %s", out)
	}
}

// signedFiles are the public key and every file make release-snapshot signs.
func signedFiles(t *testing.T, s *snapshot) (pub string, files []string) {
	t.Helper()
	pub = os.Getenv("CAPX_SIGNING_PUB")
	if pub == "" {
		pub = filepath.Join(s.root, "_artifacts", "release", "signing", "signing.pub")
	}
	files = []string{filepath.Join(s.dist, "checksums.txt"), filepath.Join(s.dist, "images", "images.json")}
	krew, _ := filepath.Glob(filepath.Join(s.dist, "krew", "*.yaml"))
	clusterctl, _ := filepath.Glob(filepath.Join(s.root, "_artifacts", "release", "clusterctl", "infrastructure-capx", s.version, "*.yaml"))
	if len(clusterctl) == 0 {
		t.Fatalf("no clusterctl files for %s: make release-snapshot writes them", s.version)
	}
	return pub, append(append(files, krew...), clusterctl...)
}

// changedCopy is a copy of f with one byte more, beside f's signature.
func changedCopy(t *testing.T, f string) string {
	t.Helper()
	changed := filepath.Join(t.TempDir(), filepath.Base(f))
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := os.ReadFile(f + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(changed, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(changed+".sig", sig, 0o644); err != nil {
		t.Fatal(err)
	}
	return changed
}
