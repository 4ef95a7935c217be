package gpucheck_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capx-io/capx/internal/gpucheck/gpuchecktest"
)

// TestRealKubectl: the real kubectl (bin/kubectl, built by hack/toolchain.sh) finds
// kubectl-capvco on PATH and runs `kubectl capvco gpucheck orphans` against the management
// cluster, credentials from the VCOCluster's Secret; kubectl completes through the
// kubectl_complete-capvco shim the plugin prints.
func TestRealKubectl(t *testing.T) {
	kubectl := filepath.Join(env.Root, "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("%v: run `make toolchain` (hack/toolchain.sh builds kubectl)", err)
	}
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "kubectl-capvco"), "github.com/capx-io/capx/cmd/kubectl-capvco").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f := gpuchecktest.Seed(t, false)
	if err := f.ApplyTo(context.Background(), env.Client); err != nil {
		t.Fatal(err)
	}
	path := dir + string(os.PathListSeparator) + os.Getenv("PATH")
	kc := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(kubectl, args...)
		cmd.Env = append(os.Environ(), "PATH="+path, "KUBECONFIG="+env.KubeconfigPath, "HOME="+dir)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errOut.String(), code
	}

	out, errOut, code := kc("capvco", "gpucheck", "orphans", "-location", gpuchecktest.Loc)
	if code != 1 || !strings.Contains(out, "13 orphaned reservations (5 releasable, 5 more with --include-renamed) among 22 reservations in 1 location") ||
		!strings.Contains(out, "Release them with: kubectl capvco gpucheck release --location "+gpuchecktest.Loc) {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if _, _, code := kc("plugin", "list"); code != 0 {
		t.Fatalf("kubectl plugin list: exit %d", code)
	}

	shim, _, code := kc("capvco", "completion", "plugin")
	if code != 0 {
		t.Fatalf("completion plugin: exit %d", code)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubectl_complete-capvco"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	out, _, code = kc("__complete", "capvco", "gpucheck", "")
	if code != 0 || !strings.Contains(out, "orphans") || !strings.Contains(out, "release") {
		t.Fatalf("kubectl completion through the shim: exit %d\n%s", code, out)
	}
}
