//go:build release

package release

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/test/e2e/install"
)

// TestOfflineInstall runs docs/install.md's offline clusterctl recipe as it stands in the doc
// (the sh block after the marker), with bash, the real clusterctl and no network, against a
// real API server. downloads/ holds what a user downloads: the snapshot's capx files, Cluster
// API's core, kubeadm bootstrap and control-plane components and metadata rendered from the
// module go.mod requires, and a stand-in for cert-manager's manifest (cert-manager's images
// cannot run here; clusterctl only needs its kinds to pass its check). clusterctl's inventory
// must then list the four providers at those versions.
func TestOfflineInstall(t *testing.T) {
	s := loadSnapshot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	recipe := docBlock(t, filepath.Join(s.root, "docs", "install.md"), "<!-- test/release TestOfflineInstall runs the next block verbatim")
	clusterctl, kubectl := s.tool(t, "clusterctl"), s.tool(t, "kubectl")
	capiDir, capiVersion := moduleDir(t, s.root, "sigs.k8s.io/cluster-api")

	work := t.TempDir()
	downloads := filepath.Join(work, "downloads")
	put := func(path string, b []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(s.root, "_artifacts", "release", "clusterctl", "infrastructure-capx", s.version, "*.yaml"))
	if len(files) < 3 {
		t.Fatalf("the snapshot's clusterctl files for %s: %v (make release-snapshot writes them)", s.version, files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		put(filepath.Join(downloads, "capx", filepath.Base(f)), b)
	}
	for file, dir := range map[string]string{
		"core-components.yaml":          "core/config/default",
		"bootstrap-components.yaml":     "bootstrap/kubeadm/config/default",
		"control-plane-components.yaml": "controlplane/kubeadm/config/default",
	} {
		m, err := install.Kustomize(ctx, kubectl, filepath.Join(capiDir, dir))
		if err != nil {
			t.Fatal(err)
		}
		b, err := m.YAML()
		if err != nil {
			t.Fatal(err)
		}
		put(filepath.Join(downloads, "cluster-api", file), b)
	}
	meta, err := os.ReadFile(filepath.Join(capiDir, "metadata.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	put(filepath.Join(downloads, "cluster-api", "metadata.yaml"), meta)
	put(filepath.Join(downloads, "cert-manager", "cert-manager.yaml"), install.CertManagerStub())

	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })

	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", recipe)
	cmd.Dir = work
	cmd.Env = []string{
		"HOME=" + t.TempDir(), "KUBECONFIG=" + env.KubeconfigPath,
		"PATH=" + filepath.Dir(clusterctl) + string(os.PathListSeparator) + "/usr/local/bin:/usr/bin:/bin",
		"CAPX_VERSION=" + s.version, "CAPI_VERSION=" + capiVersion, "CERT_MANAGER_VERSION=" + install.CertManagerVersion,
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docs/install.md's offline recipe: %v\n%s", err, out)
	}
	t.Logf("the recipe:\n%s", out)

	var providers unstructured.UnstructuredList
	providers.SetGroupVersionKind(schema.GroupVersionKind{Group: "clusterctl.cluster.x-k8s.io", Version: "v1alpha3", Kind: "ProviderList"})
	if err := env.Client.List(ctx, &providers); err != nil {
		t.Fatal(err)
	}
	inventory := map[string]string{}
	for _, p := range providers.Items {
		v, _, _ := unstructured.NestedString(p.Object, "version")
		inventory[p.GetName()] = v
	}
	for name, want := range map[string]string{"infrastructure-capx": s.version, "cluster-api": capiVersion,
		"bootstrap-kubeadm": capiVersion, "control-plane-kubeadm": capiVersion} {
		if inventory[name] != want {
			t.Errorf("clusterctl's inventory has %s at %q, want %s (inventory: %v)", name, inventory[name], want, inventory)
		}
	}
}

// docBlock is the first fenced code block after the line starting with marker, so a test runs
// what the doc shows.
func docBlock(t *testing.T, path, marker string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n"+marker)
	if !ok {
		t.Fatalf("%s has no line %q: the test runs the block after it", path, marker)
	}
	_, after, ok = strings.Cut(after, "\n```sh\n")
	if !ok {
		t.Fatalf("%s: no ```sh block after %q", path, marker)
	}
	block, _, ok := strings.Cut(after, "\n```\n")
	if !ok {
		t.Fatalf("%s: the block after %q does not end", path, marker)
	}
	return block + "\n"
}
