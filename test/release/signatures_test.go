//go:build release

package release

import (
	"os"
	"os/exec"
	"path/filepath"
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
	pub := os.Getenv("CAPX_SIGNING_PUB")
	if pub == "" {
		pub = filepath.Join(s.root, "_artifacts", "release", "signing", "signing.pub")
	}
	files := []string{filepath.Join(s.dist, "checksums.txt"), filepath.Join(s.dist, "images", "images.json")}
	krew, _ := filepath.Glob(filepath.Join(s.dist, "krew", "*.yaml"))
	clusterctl, _ := filepath.Glob(filepath.Join(s.root, "_artifacts", "release", "clusterctl", "infrastructure-capx", s.version, "*.yaml"))
	if len(clusterctl) == 0 {
		t.Fatalf("no clusterctl files for %s: make release-snapshot writes them", s.version)
	}
	files = append(append(files, krew...), clusterctl...)
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
	changed := filepath.Join(t.TempDir(), "checksums.txt")
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := os.ReadFile(files[0] + ".sig")
	if err := os.WriteFile(changed, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(changed+".sig", sig, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := verify(changed); err == nil {
		t.Errorf("a changed checksums.txt verifies: %s", out)
	}
}
