package quickstart

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The shims kubectl runs to complete "kubectl captf ..." exec the plugin's __complete.
func TestInstallCompletionShims(t *testing.T) {
	dir := t.TempDir()
	written, err := InstallCompletionShims(dir)
	if err != nil || len(written) != 2 {
		t.Fatalf("%v %v", written, err)
	}
	// A stand-in plugin that prints what it was run with.
	if err := os.WriteFile(filepath.Join(dir, "kubectl-captf"), []byte("#!/bin/sh\necho \"kubectl-captf $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "kubectl_complete-captf"), "approve", "")
	cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "kubectl-captf __complete approve \n" {
		t.Fatalf("%q %v", out, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "kubectl_complete-capvco")); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Fatalf("kubectl_complete-capvco: %v %v", fi, err)
	}
}
