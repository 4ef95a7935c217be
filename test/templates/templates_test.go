// Package templates renders every cluster template the project ships, as clusterctl does
// (${VAR} and ${VAR:=default}), and checks what the docs promise of each flavour's control plane
// and add-ons.
package templates

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/capx-io/capx/internal/manifest"
)

var variable = regexp.MustCompile(`\$\{([A-Z0-9_]+)(:=([^}]*))?\}`)

// render substitutes the template's variables: vars, else the default, else a placeholder.
func render(t *testing.T, path string, vars map[string]string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := variable.ReplaceAllStringFunc(string(b), func(m string) string {
		sub := variable.FindStringSubmatch(m)
		if v, ok := vars[sub[1]]; ok {
			return v
		}
		if sub[2] != "" {
			return sub[3]
		}
		return "placeholder-" + strings.ToLower(strings.ReplaceAll(sub[1], "_", "-"))
	})
	objs, err := manifest.Objects([]byte(out))
	if err != nil {
		t.Fatalf("%s does not render: %v", path, err)
	}
	return objs
}

func templates(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{"../../config/templates", "../../config/local/templates"} {
		m, err := filepath.Glob(filepath.Join(dir, "cluster-template*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	if len(out) < 4 {
		t.Fatalf("found only the templates %v", out)
	}
	return out
}

// shippedMinor is the Kubernetes minor version the project builds and tests with
// (hack/versions.env KUBERNETES_VERSION).
func shippedMinor(t *testing.T) int {
	t.Helper()
	f, err := os.Open("../../hack/versions.env")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "KUBERNETES_VERSION=v"); ok {
			parts := strings.Split(v, ".")
			if len(parts) < 2 {
				break
			}
			minor, err := strconv.Atoi(parts[1])
			if err == nil && parts[0] == "1" {
				return minor
			}
		}
	}
	t.Fatal("no KUBERNETES_VERSION=v1.<minor>.<patch> in hack/versions.env")
	return 0
}

// localModeDefaultSince is the first kubeadm minor whose control-plane join points the kubelet
// at the local API server by default (ControlPlaneKubeletLocalMode, beta and on by default in
// v1.33; in v1.36 the gate is gone and cmd/kubeadm/app/cmd/phases/join/kubelet.go does it for
// every control-plane join).
const localModeDefaultSince = 33

// TestControlPlaneUpgradeSkew renders each flavour and checks the decision docs/capvco/limitations.md
// records: the Kubernetes the project ships is one whose kubeadm keeps a joining control-plane
// node's kubelet on its own, same-version API server, so no flavour carries the v1.30->v1.31
// local-apiserver workaround, and none turns kubeadm's own behaviour off.
func TestControlPlaneUpgradeSkew(t *testing.T) {
	if m := shippedMinor(t); m < localModeDefaultSince {
		t.Fatalf("the project ships Kubernetes 1.%d, whose kubeadm does not point a joining control plane's kubelet at its local API server: the local-apiserver workaround is needed in every control-plane flavour", m)
	}
	flavours := 0
	for _, path := range templates(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			for _, o := range render(t, path, nil) {
				if o.GetKind() != "KubeadmControlPlane" && o.GetKind() != "KubeadmConfigTemplate" {
					continue
				}
				if o.GetKind() == "KubeadmControlPlane" {
					flavours++
					if v, _, _ := unstructured.NestedString(o.Object, "spec", "version"); v == "" {
						t.Errorf("%s: KubeadmControlPlane without spec.version", o.GetName())
					}
				}
				spec, _, _ := unstructured.NestedMap(o.Object, "spec")
				text := strings.ToLower(strings.Join(flatten(spec), "\n"))
				for _, bad := range []string{"controlplanekubeletlocalmode", "kubelet.conf"} {
					if strings.Contains(text, bad) {
						t.Errorf("%s %s mentions %s: the flavours carry no local-apiserver workaround and keep kubeadm's own", o.GetKind(), o.GetName(), bad)
					}
				}
			}
		})
	}
	if flavours < 2 {
		t.Fatalf("%d control-plane flavours rendered; the release's CAPTF and vco templates each have one", flavours)
	}
}

// TestGPUAddonVariable: the vco flavour writes VCO_GPU_ADDON into spec.addons.gpu.addon,
// nvidia unless set.
func TestGPUAddonVariable(t *testing.T) {
	for vars, want := range map[string]string{"": "nvidia", "none": "none"} {
		v := map[string]string{}
		if vars != "" {
			v["VCO_GPU_ADDON"] = vars
		}
		var got string
		for _, o := range render(t, "../../config/templates/cluster-template-vco.yaml", v) {
			if o.GetKind() == "VCOCluster" {
				got, _, _ = unstructured.NestedString(o.Object, "spec", "addons", "gpu", "addon")
			}
		}
		if got != want {
			t.Errorf("VCO_GPU_ADDON=%q: spec.addons.gpu.addon %q, want %q", vars, got, want)
		}
	}
}

// flatten is every string key and value of a nested object.
func flatten(v any) []string {
	switch x := v.(type) {
	case map[string]any:
		var out []string
		for k, e := range x {
			out = append(out, k)
			out = append(out, flatten(e)...)
		}
		return out
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, flatten(e)...)
		}
		return out
	case string:
		return []string{x}
	}
	return nil
}
