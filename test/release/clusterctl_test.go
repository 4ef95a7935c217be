//go:build release

package release

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/test/e2e/install"
)

const infraGroup = "infrastructure.cluster.x-k8s.io"

// TestClusterctl uses the snapshot's clusterctl files (_artifacts/release/clusterctl, written by
// goreleaser's before hook) as a clusterctl local repository, beside Cluster API core rendered
// from the module go.mod requires, with the real clusterctl against a real API server:
// generate cluster lists each flavour's variables and renders objects our CRDs accept, generate
// provider describes the components' variables, and init installs both providers with a
// variable set from the environment.
func TestClusterctl(t *testing.T) {
	s := loadSnapshot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	clusterctl, kubectl := s.tool(t, "clusterctl"), s.tool(t, "kubectl")
	files := filepath.Join(s.root, "_artifacts", "release", "clusterctl", "infrastructure-capx", s.version)
	components, err := os.ReadFile(filepath.Join(files, "infrastructure-components.yaml"))
	if err != nil {
		t.Fatalf("%v: goreleaser's before hook (hack/clusterctlrepo) writes it", err)
	}
	c := &install.Components{ProviderVersion: s.version, Provider: components, Templates: map[string][]byte{}}
	if c.ProviderMetadata, err = os.ReadFile(filepath.Join(files, "metadata.yaml")); err != nil {
		t.Fatal(err)
	}
	templates, _ := filepath.Glob(filepath.Join(files, "cluster-template*.yaml"))
	for _, p := range templates {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		flavor := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSuffix(filepath.Base(p), ".yaml"), "cluster-template"), "-")
		c.Templates[flavor] = b
	}
	if _, ok := c.Templates[""]; !ok {
		t.Fatalf("no cluster-template.yaml in %s", files)
	}
	if _, ok := c.Templates["vco"]; !ok {
		t.Fatalf("no cluster-template-vco.yaml in %s", files)
	}
	capiDir, capiVersion := moduleDir(t, s.root, "sigs.k8s.io/cluster-api")
	c.CAPIVersion = capiVersion
	core, err := install.Kustomize(ctx, kubectl, filepath.Join(capiDir, "core", "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Core, err = core.YAML(); err != nil {
		t.Fatal(err)
	}
	if c.CoreMetadata, err = os.ReadFile(filepath.Join(capiDir, "metadata.yaml")); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	repo, err := install.WriteRepository(install.Paths{Root: s.root, BinDir: s.bin, WorkDir: work}, filepath.Join(work, "repo"), c)
	if err != nil {
		t.Fatal(err)
	}

	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	cc := func(args ...string) string {
		t.Helper()
		out, err := repo.Clusterctl(ctx, env.KubeconfigPath, args...)
		if err != nil {
			t.Fatalf("clusterctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	flavours := []struct {
		flavor   string
		required []string
		vars     map[string]string
		infra    []string // our kinds the template creates
	}{
		{"", []string{"CAPTF_CLUSTER_MODULE_IMAGE", "CAPTF_MACHINE_MODULE_IMAGE", "KUBERNETES_VERSION"},
			map[string]string{"CAPTF_CLUSTER_MODULE_IMAGE": "registry.example/mods/cluster:1", "CAPTF_MACHINE_MODULE_IMAGE": "registry.example/mods/machine:1", "CAPTF_APPLY_POLICY": "Manual"},
			[]string{"TerraformCluster", "TerraformMachineTemplate", "TerraformMachineTemplate"}},
		{"vco", []string{"KUBERNETES_VERSION", "VCO_IMAGE_NAME", "VCO_LOCATION"},
			map[string]string{"VCO_LOCATION": "nl-rmd-dc01-001", "VCO_IMAGE_NAME": "ubuntu-24.04-k8s-1.36"},
			[]string{"VCOCluster", "VCOMachineTemplate", "VCOMachineTemplate"}},
	}
	for _, f := range flavours {
		name := "flavor-" + f.flavor
		if f.flavor == "" {
			name = "default-flavor"
		}
		t.Run("generate cluster "+name, func(t *testing.T) {
			ns := env.NewNamespace(t)
			args := []string{"generate", "cluster", "demo", "--infrastructure", "capx:" + s.version, "--target-namespace", ns}
			if f.flavor != "" {
				args = append(args, "--flavor", f.flavor)
			}
			list := cc(append(args, "--list-variables")...)
			required := section(list, "Required Variables:")
			if strings.Join(required, ",") != strings.Join(f.required, ",") {
				t.Errorf("required variables %v, want %v\n%s", required, f.required, list)
			}
			for k, v := range f.vars {
				t.Setenv(k, v)
			}
			out := cc(append(args, "--kubernetes-version", "v1.36.3", "--control-plane-machine-count", "3", "--worker-machine-count", "2")...)
			objs, err := install.ParseManifest([]byte(out))
			if err != nil {
				t.Fatal(err)
			}
			checkRefs(t, objs)
			var created []string
			for _, o := range objs {
				if o.GroupVersionKind().Group != infraGroup {
					continue
				}
				// Our CRDs' schemas and admission policies judge what the template renders.
				if err := env.Client.Create(ctx, o); err != nil {
					t.Errorf("create %s %s from the template: %v", o.GetKind(), o.GetName(), err)
				}
				created = append(created, o.GetKind())
			}
			sort.Strings(created)
			want := append([]string{}, f.infra...)
			sort.Strings(want)
			if strings.Join(created, ",") != strings.Join(want, ",") {
				t.Errorf("the template created %v of our kinds, want %v", created, want)
			}
		})
	}

	t.Run("generate provider --describe", func(t *testing.T) {
		// generate provider reads no cluster and takes no --kubeconfig.
		out := run(t, []string{"CLUSTERCTL_DISABLE_VERSIONCHECK=true"}, clusterctl,
			"generate", "provider", "--infrastructure", "capx:"+s.version, "--describe", "--config", repo.Config())
		for _, v := range []string{"CAPX_PROVIDERS", "CAPX_STATE_BACKUPS", "CAPX_WATCH_FILTER", "CAPX_DRIFT_INTERVAL"} {
			if !strings.Contains(out, v) {
				t.Errorf("generate provider --describe does not list %s:\n%s", v, out)
			}
		}
	})

	t.Run("init", func(t *testing.T) {
		t.Setenv("CAPX_STATE_BACKUPS", "7")
		cc("init", "--core", install.CoreProvider+":"+capiVersion, "--infrastructure", install.Provider+":"+s.version,
			"--bootstrap", "-", "--control-plane", "-")

		var d appsv1.Deployment
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: install.ProviderNamespace, Name: "capx-controller-manager"}, &d); err != nil {
			t.Fatal(err)
		}
		m := d.Spec.Template.Spec.Containers[0]
		if want := "ghcr.io/capx-io/capx-manager:" + s.version; m.Image != want {
			t.Errorf("manager image %s, want %s", m.Image, want)
		}
		got := map[string]string{}
		for _, e := range m.Env {
			got[e.Name] = e.Value
		}
		for k, v := range map[string]string{"CAPX_STATE_BACKUPS": "7", "CAPX_PROVIDERS": "captf,capvco", "CAPX_WATCH_FILTER": "",
			"CAPX_RUNNER_IMAGE": "ghcr.io/capx-io/capx-manager:" + s.version} {
			if have, ok := got[k]; !ok || have != v {
				t.Errorf("manager env %s=%q (set: %t), want %q", k, have, ok, v)
			}
		}
		// clusterctl's inventory: what `clusterctl move` and `clusterctl upgrade` go by.
		var providers unstructured.UnstructuredList
		providers.SetGroupVersionKind(schema.GroupVersionKind{Group: "clusterctl.cluster.x-k8s.io", Version: "v1alpha3", Kind: "ProviderList"})
		if err := env.Client.List(ctx, &providers); err != nil {
			t.Fatal(err)
		}
		inventory := map[string]string{}
		for _, p := range providers.Items {
			v, _, _ := unstructured.NestedString(p.Object, "version")
			inventory[p.GetNamespace()+"/"+p.GetName()] = v
		}
		if inventory[install.ProviderNamespace+"/infrastructure-capx"] != s.version {
			t.Errorf("inventory %v, want %s/infrastructure-capx at %s", inventory, install.ProviderNamespace, s.version)
		}
		if inventory[install.CoreNamespace+"/cluster-api"] != capiVersion {
			t.Errorf("inventory %v, want %s/cluster-api at %s", inventory, install.CoreNamespace, capiVersion)
		}
	})
}

// section lists the "  - NAME" lines under a heading of clusterctl's --list-variables output.
func section(out, heading string) []string {
	var names []string
	in := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.TrimSpace(line) == heading:
			in = true
		case in && strings.HasPrefix(line, "  - "):
			names = append(names, strings.Fields(strings.TrimPrefix(line, "  - "))[0])
		case in && strings.TrimSpace(line) == "":
			in = false
		}
	}
	sort.Strings(names)
	return names
}

// checkRefs fails for a reference (infrastructureRef, controlPlaneRef, bootstrap.configRef) to
// an object the rendered template does not contain.
func checkRefs(t *testing.T, objs install.Manifest) {
	t.Helper()
	have := map[string]bool{}
	for _, o := range objs {
		have[o.GroupVersionKind().Group+"/"+o.GetKind()+"/"+o.GetName()] = true
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if kind, ok := v["kind"].(string); ok && strings.HasSuffix(path, "Ref") {
				key := v["apiGroup"].(string) + "/" + kind + "/" + v["name"].(string)
				if !have[key] {
					t.Errorf("%s names %s, which the template does not create", path, key)
				}
			}
			for k, c := range v {
				walk(path+"."+k, c)
			}
		case []any:
			for _, c := range v {
				walk(path, c)
			}
		}
	}
	for _, o := range objs {
		walk(o.GetKind(), o.Object)
	}
}

func moduleDir(t *testing.T, root, module string) (dir, version string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-json", module)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", module, err)
	}
	var m struct{ Dir, Version string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("module %s is not in the module cache (%v): run go mod download", module, err)
	}
	return m.Dir, m.Version
}
