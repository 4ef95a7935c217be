//go:build release

package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKrewInstallsThePlugins validates each rendered krew manifest with krew's own validator,
// installs the snapshot's archive for this machine with the real krew into a temporary krew
// root, and runs `kubectl <plugin> version` through the real kubectl from that root's bin/.
func TestKrewInstallsThePlugins(t *testing.T) {
	s := loadSnapshot(t)
	for _, plugin := range []string{"captf", "capvco"} {
		t.Run(plugin, func(t *testing.T) {
			bin := s.plugin(t, plugin)
			krew, kubectl := s.tool(t, "krew"), s.isolatedKubectl(t)
			manifest := filepath.Join(s.dist, "krew", plugin+".yaml")
			if _, err := os.Stat(manifest); err != nil {
				t.Fatalf("%v: make release-snapshot renders it from plugins/krew/%s.yaml", err, plugin)
			}
			run(t, nil, s.tool(t, "validate-krew-manifest"), "-manifest", manifest, "-skip-install")

			root := t.TempDir()
			env := []string{
				"KREW_ROOT=" + root,
				"KREW_NO_UPGRADE_CHECK=1", // krew would otherwise ask GitHub for its latest release
				"PATH=" + filepath.Join(root, "bin") + string(os.PathListSeparator) + filepath.Dir(kubectl),
				"HOME=" + t.TempDir(),
				"KUBECONFIG=" + os.DevNull,
			}
			archive := s.hostArchive(t, bin)
			out := run(t, env, krew, "install", "--manifest="+manifest, "--archive="+archive.Path)
			if !strings.Contains(out, "Installed plugin: "+plugin) {
				t.Errorf("krew install said:\n%s", out)
			}
			// krew's receipt records the installed version (krew list needs the index, which is not
			// fetched here).
			receipt, err := os.ReadFile(filepath.Join(root, "receipts", plugin+".yaml"))
			if err != nil || !strings.Contains(string(receipt), "version: "+s.version) {
				t.Errorf("krew's receipt for %s (%v) does not record %s:\n%s", plugin, err, s.version, receipt)
			}

			// kubectl finds the plugin on PATH (krew's bin/ symlink) and runs it; its version is
			// the snapshot's, stamped by goreleaser through internal/version.
			got := run(t, env, kubectl, plugin, "version")
			if !strings.Contains(got, s.version) {
				t.Errorf("kubectl %s version printed %q, want the snapshot's version %s", plugin, got, s.version)
			}
			plugins := run(t, env, kubectl, "plugin", "list", "--name-only")
			if !strings.Contains(plugins, bin) {
				t.Errorf("kubectl plugin list does not show %s:\n%s", bin, plugins)
			}
			// The completion shim is unpacked beside the binary for users to link (completions/README.md).
			shims, _ := filepath.Glob(filepath.Join(root, "store", plugin, "*", "kubectl_complete-"+plugin))
			if len(shims) != 1 {
				t.Errorf("krew's store has %d kubectl_complete-%s shims, want 1", len(shims), plugin)
			}

			// Listed and uninstalled as docs/install.md says: krew list and uninstall want an
			// index, and an empty git repository is one on a machine that cannot fetch krew's.
			if out, err := runErr(t, env, krew, "list"); err == nil || !strings.Contains(out, "index is not initialized") {
				t.Errorf("krew list without an index: %v\n%s; docs/install.md says it needs one", err, out)
			}
			run(t, env, "git", "init", "-q", filepath.Join(root, "index", "default"))
			if out := run(t, env, krew, "list"); !strings.Contains(out, "detached/"+plugin) {
				t.Errorf("krew list does not show detached/%s:\n%s", plugin, out)
			}
			if out := run(t, env, krew, "uninstall", plugin); !strings.Contains(out, "Uninstalled plugin: "+plugin) {
				t.Errorf("krew uninstall said:\n%s", out)
			}
			// (kubectl plugin list fails when it finds no plugin at all: its output is what counts.)
			if plugins, _ := runErr(t, env, kubectl, "plugin", "list", "--name-only"); strings.Contains(plugins, bin) {
				t.Errorf("kubectl plugin list still shows %s after krew uninstall:\n%s", bin, plugins)
			}
		})
	}
}
