package sriov

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestInstallPlugin: the plugin lands executable under its own name, replaces an older copy,
// and leaves no temporary file; a missing source or directory fails and says which.
func TestInstallPlugin(t *testing.T) {
	src := filepath.Join(t.TempDir(), "capvco-sriov")
	if err := os.WriteFile(src, []byte("new plugin"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dst := filepath.Join(dir, "capvco-sriov")
	if err := os.WriteFile(dst, []byte("old plugin, longer than the new one"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := InstallPlugin(src, dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(b, []byte("new plugin")) {
		t.Fatalf("installed %q, %v", b, err)
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("installed plugin mode %v, %v", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the plugin directory holds %d entries, want only the plugin", len(entries))
	}
	if err := InstallPlugin(filepath.Join(t.TempDir(), "missing"), dir); err == nil {
		t.Error("a missing plugin binary installed")
	}
	if err := InstallPlugin(src, filepath.Join(dir, "no-such-dir")); err == nil {
		t.Error("installed into a directory that does not exist")
	}
}
