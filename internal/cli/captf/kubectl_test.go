package captf_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/capx-io/capx/internal/testenv"
)

var (
	pluginOnce sync.Once
	pluginDir  string
	pluginErr  error
)

// pluginPath builds kubectl-captf once and writes the kubectl_complete-captf shim (as
// `completion plugin` prints it) beside it; the directory goes first on PATH.
func pluginPath(t testing.TB) string {
	t.Helper()
	pluginOnce.Do(func() {
		pluginDir, pluginErr = os.MkdirTemp("", "kubectl-captf-")
		if pluginErr != nil {
			return
		}
		build := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "kubectl-captf"), "./cmd/kubectl-captf")
		build.Dir = env.Root
		if out, err := build.CombinedOutput(); err != nil {
			pluginErr = err
			t.Logf("%s", out)
			return
		}
		shim, err := exec.Command(filepath.Join(pluginDir, "kubectl-captf"), "completion", "plugin").Output()
		if err != nil {
			pluginErr = err
			return
		}
		pluginErr = os.WriteFile(filepath.Join(pluginDir, "kubectl_complete-captf"), shim, 0o755)
	})
	if pluginErr != nil {
		t.Fatal(pluginErr)
	}
	return pluginDir
}

// kubectl runs the toolchain's real kubectl with the plugin on PATH.
func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	dir := pluginPath(t)
	bin := filepath.Join(env.Root, "bin", "kubectl")
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+env.KubeconfigPath, "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestKubectlRunsThePlugin: the real kubectl finds kubectl-captf on PATH, passes it its
// arguments and the kubeconfig, and completes `kubectl captf ...` through the
// kubectl_complete-captf shim, names from the cluster included.
func TestKubectlRunsThePlugin(t *testing.T) {
	ns := env.NewNamespace(t)
	create(t, testenv.Cluster(ns, "alpha", "TerraformCluster", "alpha"), testenv.Cluster(ns, "beta", "TerraformCluster", "beta"))

	out, err := kubectl(t, "plugin", "list")
	if err != nil || !strings.Contains(out, "kubectl-captf") {
		t.Fatalf("kubectl plugin list: %v\n%s", err, out)
	}
	out, err = kubectl(t, "captf", "version", "--client")
	if err != nil || !strings.HasPrefix(out, "kubectl-captf ") {
		t.Fatalf("kubectl captf version: %v\n%s", err, out)
	}
	out, err = kubectl(t, "captf", "--help")
	if err != nil || !strings.Contains(out, "kubectl captf [command]") {
		t.Fatalf("help: %v\n%s", err, out)
	}
	out, err = kubectl(t, "captf", "plan", "list", "-n", ns)
	if err != nil || !strings.Contains(out, "No plans wait for approval") {
		t.Fatalf("plan list through kubectl: %v\n%s", err, out)
	}
	out, err = kubectl(t, "captf", "plan", "show", "nothing", "-n", ns)
	if code := exitCode(err); code != 2 || !strings.Contains(out, "no TerraformPlan and no CAPTF object") {
		t.Fatalf("plan show of nothing: exit %d\n%s", code, out)
	}

	// Completion through kubectl: commands, then Cluster names from the API server.
	out, err = kubectl(t, "__complete", "captf", "pl")
	if err != nil || !strings.Contains(out, "plan") {
		t.Fatalf("complete commands: %v\n%s", err, out)
	}
	out, err = kubectl(t, "__complete", "captf", "status", "-n", ns, "")
	if err != nil || !strings.Contains(out, "alpha") || !strings.Contains(out, "beta") {
		t.Fatalf("complete names: %v\n%s", err, out)
	}
	out, err = kubectl(t, "__complete", "captf", "status", "-n", ns, "--color", "")
	if err != nil || !strings.Contains(out, "never") {
		t.Fatalf("complete --color: %v\n%s", err, out)
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if e, ok := err.(*exec.ExitError); ok {
		return e.ExitCode()
	}
	return -1
}
