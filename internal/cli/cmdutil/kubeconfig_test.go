package cmdutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A kubeconfig that is not there is named, before client-go falls back to localhost:8080.
func TestMissingKubeconfigIsNamed(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBECONFIG", "/nonexistent/kubeconfig")
	streams, _, _, _ := TestIOStreams(false)
	_, err := NewFactory(streams, "kubectl test").Client()
	if err == nil || !strings.Contains(err.Error(), "$KUBECONFIG is /nonexistent/kubeconfig, and no such file exists") || strings.Contains(err.Error(), "localhost:8080") {
		t.Fatalf("%v", err)
	}
}

func TestKubeconfigProblem(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(good, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	for _, tc := range []struct {
		name, flag, env string
		inCluster       bool
		want            string
	}{
		{"--kubeconfig missing", "/nope", good, false, "--kubeconfig /nope: no such file"},
		{"--kubeconfig there", good, "/nope", false, ""},
		{"$KUBECONFIG missing", "", "/nope:/nope2", false, "$KUBECONFIG is /nope:/nope2, and no such file exists"},
		{"$KUBECONFIG, one there", "", "/nope:" + good, false, ""},
		{"nothing set, no ~/.kube/config", "", "", false, "no kubeconfig: " + filepath.Join(dir, ".kube", "config") + " does not exist"},
		{"nothing set, in a pod", "", "", true, ""},
	} {
		err := KubeconfigProblem(tc.flag, tc.env, dir, tc.inCluster, exists)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
