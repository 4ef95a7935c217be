//go:build release

package release

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/capx-io/capx/hack/dist"
	"github.com/capx-io/capx/internal/testenv"
)

// TestCompletionThroughKubectl types `kubectl <plugin> ... <TAB>` the way a shell does (`kubectl
// __complete ...`) with the snapshot's plugin binary and the committed shim
// completions/kubectl_complete-<plugin> on PATH, so the real kubectl hands the words to the
// shim and the plugin completes them: first its commands, then the names of Clusters that
// exist on a real API server.
func TestCompletionThroughKubectl(t *testing.T) {
	s := loadSnapshot(t)
	// A command of each plugin whose first argument is a Cluster's name.
	byCluster := map[string][]string{"captf": {"status"}, "capvco": {"move", "preflight"}}
	subcommands := map[string][]string{"captf": {"approve", "status", "version"}, "capvco": {"gpucheck", "move", "version"}}

	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubectl := s.isolatedKubectl(t)

	for _, plugin := range []string{"captf", "capvco"} {
		t.Run(plugin, func(t *testing.T) {
			bin := s.plugin(t, plugin)
			var pluginDir string
			for _, b := range dist.Filter(s.artifacts, dist.Binary, bin) {
				if b.Goos == runtime.GOOS && b.Goarch == runtime.GOARCH {
					pluginDir = filepath.Dir(b.Path)
				}
			}
			if pluginDir == "" {
				t.Fatalf("dist/artifacts.json has no %s binary for this machine: rerun make release-snapshot", bin)
			}
			shim := filepath.Join(s.root, "completions", "kubectl_complete-"+plugin)
			if st, err := os.Stat(shim); err != nil || st.Mode()&0o111 == 0 {
				t.Fatalf("%s is missing or not executable (%v): make release-generate writes it", shim, err)
			}
			vars := []string{
				"PATH=" + strings.Join([]string{filepath.Dir(shim), pluginDir, filepath.Dir(kubectl), "/usr/bin", "/bin"}, string(os.PathListSeparator)),
				"KUBECONFIG=" + env.KubeconfigPath,
				"HOME=" + t.TempDir(),
			}
			complete := func(words ...string) []string {
				t.Helper()
				out := runStdout(t, vars, kubectl, append([]string{"__complete", plugin}, words...)...)
				var names []string
				for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
					if line == "" || strings.HasPrefix(line, ":") || strings.HasPrefix(line, "Completion ended") {
						continue
					}
					names = append(names, strings.SplitN(line, "\t", 2)[0])
				}
				return names
			}

			got := complete("")
			for _, want := range subcommands[plugin] {
				if !contains(got, want) {
					t.Errorf("kubectl %s <TAB> offered %v, want %s among them", plugin, got, want)
				}
			}

			ns := env.NewNamespace(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, name := range []string{"alpha", "beta"} {
				if err := env.Client.Create(ctx, testenv.Cluster(ns, name, "TerraformCluster", name)); err != nil {
					t.Fatal(err)
				}
			}
			words := append(append([]string{}, byCluster[plugin]...), "-n", ns, "")
			got = complete(words...)
			if !contains(got, "alpha") || !contains(got, "beta") {
				t.Errorf("kubectl %s %s<TAB> offered %v, want the Clusters alpha and beta of %s",
					plugin, strings.Join(words[:len(words)-1], " ")+" ", got, ns)
			}
			got = complete(append(words[:len(words)-1], "al")...)
			if len(got) != 1 || got[0] != "alpha" {
				t.Errorf("kubectl %s ... al<TAB> offered %v, want only alpha", plugin, got)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}
