//go:build release

package release

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/capx-io/capx/hack/dist"
)

// TestKrewTemplatesCommitted: the committed krew templates (plugins/krew) list every platform
// goreleaser.yaml builds each plugin for, one entry per platform. A snapshot of this machine's
// platform only (make release-snapshot RELEASE_PLATFORMS=host, as CI builds) writes its
// templates to _artifacts/release/krew-host instead, and make verify-release cannot compare
// those with the committed ones: here each must be the committed template with the platforms
// not built left out (the same header, descriptions and caveats, and the entries it has
// verbatim), so a description or an archive's files that changed still fail CI.
func TestKrewTemplatesCommitted(t *testing.T) {
	s := loadSnapshot(t)
	want := goreleaserPlatforms(t, filepath.Join(s.root, "goreleaser.yaml"))
	for _, plugin := range []string{"captf", "capvco"} {
		t.Run(plugin, func(t *testing.T) {
			bin := s.plugin(t, plugin)
			committed := readTemplate(t, filepath.Join(s.root, "plugins", "krew", plugin+".yaml"))
			var listed []string
			for _, e := range committed.entries {
				listed = append(listed, e.platform)
			}
			if !slices.Equal(listed, want[bin]) {
				t.Errorf("plugins/krew/%s.yaml lists %v, goreleaser.yaml builds %s for %v: run make release-snapshot and commit", plugin, listed, bin, want[bin])
			}
			// The completion shim is a sh script: windows archives go without it.
			for _, e := range committed.entries {
				if strings.HasPrefix(e.platform, "windows/") && strings.Contains(e.text, "kubectl_complete-") {
					t.Errorf("plugins/krew/%s.yaml's %s entry installs the sh completion shim: windows archives must not carry it", plugin, e.platform)
				}
			}
			built := len(dist.Filter(s.artifacts, dist.Archive, bin))
			if built == len(want[bin]) {
				return // every platform: make verify-release compares the committed file itself
			}
			host := readTemplate(t, filepath.Join(s.root, "_artifacts", "release", "krew-host", plugin+".yaml"))
			if host.header != committed.header {
				t.Errorf("plugins/krew/%s.yaml's header differs from the snapshot's (_artifacts/release/krew-host): run make release-snapshot (all platforms) and commit", plugin)
			}
			if len(host.entries) != built {
				t.Errorf("the snapshot's template has %d platforms, the dist %d archives", len(host.entries), built)
			}
			for _, e := range host.entries {
				if !slices.Contains(committed.entries, e) {
					t.Errorf("plugins/krew/%s.yaml's %s entry differs from the snapshot's: run make release-snapshot (all platforms) and commit\nsnapshot's:\n%s", plugin, e.platform, e.text)
				}
			}
		})
	}
}

type krewTemplate struct {
	header  string
	entries []krewEntry
}

type krewEntry struct{ platform, text string }

// readTemplate splits a krew template (hack/krewmanifests) into what precedes the platforms and
// one entry per platform, keyed os/arch.
func readTemplate(t *testing.T, path string) krewTemplate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(b), "\n  - selector:\n")
	tmpl := krewTemplate{header: parts[0]}
	for _, p := range parts[1:] {
		var goos, goarch string
		for _, l := range strings.Split(p, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "os: "); ok && goos == "" {
				goos = v
			}
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "arch: "); ok && goarch == "" {
				goarch = v
			}
		}
		tmpl.entries = append(tmpl.entries, krewEntry{platform: goos + "/" + goarch, text: strings.TrimRight(p, "\n")})
	}
	if len(tmpl.entries) == 0 {
		t.Fatalf("%s has no platforms", path)
	}
	return tmpl
}

// goreleaserPlatforms maps each build id to its platforms, sorted as krewmanifests writes them.
func goreleaserPlatforms(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Builds []struct {
			ID     string   `json:"id"`
			Goos   []string `json:"goos"`
			Goarch []string `json:"goarch"`
		} `json:"builds"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, bd := range c.Builds {
		for _, goos := range bd.Goos {
			for _, goarch := range bd.Goarch {
				out[bd.ID] = append(out[bd.ID], goos+"/"+goarch)
			}
		}
		slices.Sort(out[bd.ID])
	}
	return out
}
