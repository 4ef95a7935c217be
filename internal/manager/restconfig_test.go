package manager

import (
	"os"
	"path/filepath"
	"testing"
)

// TestKubeconfigHasNoClientRateLimit: a manager started with --kubeconfig sends requests as fast
// as one started in-cluster (QPS -1: the API server's priority and fairness shapes them), not at
// client-go's default of 5 a second.
func TestKubeconfigHasNoClientRateLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kubeconfig := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := RESTConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != -1 || cfg.RateLimiter != nil {
		t.Errorf("QPS %v, rate limiter %v: want no client-side rate limit", cfg.QPS, cfg.RateLimiter)
	}
	if _, err := RESTConfig(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing kubeconfig is an error")
	}
}
