package install

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/yaml"

	"github.com/capx-io/capx/test/images"
)

// The providers as clusterctl knows them.
const (
	// CoreProvider is Cluster API core: clusterctl's "cluster-api", in capi-system.
	CoreProvider  = "cluster-api"
	CoreNamespace = "capi-system"
	// Provider is this repository's infrastructure provider (CAPTF and CAPVCO in one manager):
	// clusterctl's "capx", labelled infrastructure-capx, in capx-system.
	Provider          = "capx"
	ProviderNamespace = "capx-system"
	// placeholderTag is the tag config/local and its templates give the local images; Render
	// replaces each such reference with the image's content tag.
	placeholderTag = ":dev"
)

// Components are Cluster API core's and the providers' components as a release would ship
// them, made installable here: local images, and no cert-manager needed.
type Components struct {
	CAPIVersion, ProviderVersion string
	// Core and Provider keep clusterctl's variables (${NAME:=default}); clusterctl substitutes
	// them, the manifests flow uses SubstituteDefaults.
	Core, Provider []byte
	// CoreMetadata and ProviderMetadata are clusterctl's metadata.yaml files.
	CoreMetadata, ProviderMetadata []byte
	// Templates are the cluster templates by flavor ("" for cluster-template.yaml).
	Templates map[string][]byte
}

// Render renders the components from the cluster-api module (the version go.mod requires) and
// config/local, with the images of imgs. The webhook certificates are kept in
// <WorkDir>/certs, so repeated renders produce the same components.
func Render(ctx context.Context, p Paths, imgs *images.LocalSet) (*Components, error) {
	capiDir, capiVersion, err := moduleDir(ctx, p.Root, "sigs.k8s.io/cluster-api")
	if err != nil {
		return nil, err
	}
	c := &Components{CAPIVersion: capiVersion, Templates: map[string][]byte{}}

	core, err := Kustomize(ctx, p.Kubectl(), filepath.Join(capiDir, "core", "config", "default"))
	if err != nil {
		return nil, fmt.Errorf("render cluster-api core: %w", err)
	}
	if core, err = WithoutCertManager(core, filepath.Join(p.WorkDir, "certs")); err != nil {
		return nil, fmt.Errorf("cluster-api core: %w", err)
	}
	if err := localizeManager(core, imgs.CAPIManager.Ref); err != nil {
		return nil, fmt.Errorf("cluster-api core: %w", err)
	}
	if c.Core, err = core.YAML(); err != nil {
		return nil, err
	}
	if c.CoreMetadata, err = os.ReadFile(filepath.Join(capiDir, "metadata.yaml")); err != nil {
		return nil, err
	}

	provider, err := Kustomize(ctx, p.Kubectl(), filepath.Join(p.Root, "config", "local"))
	if err != nil {
		return nil, fmt.Errorf("render config/local: %w", err)
	}
	if c.Provider, err = provider.YAML(); err != nil {
		return nil, err
	}
	manager := images.ManagerRepository + placeholderTag
	if !bytes.Contains(c.Provider, []byte(manager)) {
		return nil, fmt.Errorf("config/local no longer names the manager image %s, which the installers replace", manager)
	}
	c.Provider = withLocalImages(c.Provider, imgs)
	if c.ProviderMetadata, err = os.ReadFile(filepath.Join(p.Root, "config", "metadata.yaml")); err != nil {
		return nil, err
	}
	if c.ProviderVersion, err = latestRelease(c.ProviderMetadata); err != nil {
		return nil, fmt.Errorf("config/metadata.yaml: %w", err)
	}

	templates, _ := filepath.Glob(filepath.Join(p.Root, "config", "local", "templates", "cluster-template*.yaml"))
	for _, t := range templates {
		b, err := os.ReadFile(t)
		if err != nil {
			return nil, err
		}
		flavor := strings.TrimPrefix(strings.TrimSuffix(filepath.Base(t), ".yaml"), "cluster-template")
		c.Templates[strings.TrimPrefix(flavor, "-")] = withLocalImages(b, imgs)
	}
	return c, nil
}

// withLocalImages replaces the placeholder references of the local images (repository:dev) with
// the images built.
func withLocalImages(b []byte, imgs *images.LocalSet) []byte {
	refs := map[string]string{images.ManagerRepository: imgs.Manager.Ref}
	for role, m := range imgs.Modules {
		refs[images.ModuleRepository+"/"+role] = m.Ref
	}
	for repo, ref := range refs {
		b = bytes.ReplaceAll(b, []byte(repo+placeholderTag), []byte(ref))
	}
	return b
}

// localizeManager points the manager container of the components' only Deployment at a local
// image, which is imported, never pulled, and gives its probes 5 s instead of 1 s: on a local
// cluster it shares two cores with OpenTofu Jobs and builds, and a probe that times out three
// times restarts it (with its webhooks, so API calls fail meanwhile). It also requests 500m of
// CPU: without a request it is a BestEffort pod, which the kubelet gives the smallest CPU share
// (2 against a module Job's 256), and the Jobs starve it until its probes time out.
// config/local does the same for the capx manager.
func localizeManager(m Manifest, image string) error {
	for _, o := range m {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			c := c.(map[string]any)
			if c["name"] != "manager" {
				continue
			}
			c["image"] = image
			c["imagePullPolicy"] = "IfNotPresent"
			if err := unstructured.SetNestedField(c, "500m", "resources", "requests", "cpu"); err != nil {
				return err
			}
			for probe, failures := range map[string]int64{"livenessProbe": 6, "readinessProbe": 3} {
				if p, ok := c[probe].(map[string]any); ok {
					p["timeoutSeconds"] = int64(5)
					p["failureThreshold"] = failures
				}
			}
			return unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers")
		}
	}
	return fmt.Errorf("no Deployment with a manager container")
}

// moduleDir returns the folder and version of a module the repository requires.
func moduleDir(ctx context.Context, root, module string) (dir, version string, err error) {
	out, err := runIn(ctx, nil, nil, "go", "-C", root, "list", "-m", "-json", module)
	if err != nil {
		return "", "", err
	}
	var m struct{ Dir, Version string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", "", err
	}
	if m.Dir == "" {
		return "", "", fmt.Errorf("module %s is not in the module cache: run go mod download", module)
	}
	return m.Dir, m.Version, nil
}

// latestRelease is the newest release series of a clusterctl metadata file, as vMAJOR.MINOR.0.
func latestRelease(metadata []byte) (string, error) {
	var md clusterctlv1.Metadata
	if err := yaml.Unmarshal(metadata, &md); err != nil {
		return "", err
	}
	if len(md.ReleaseSeries) == 0 {
		return "", fmt.Errorf("no releaseSeries")
	}
	latest := md.ReleaseSeries[0]
	for _, s := range md.ReleaseSeries[1:] {
		if s.Major > latest.Major || s.Major == latest.Major && s.Minor > latest.Minor {
			latest = s
		}
	}
	return fmt.Sprintf("v%d.%d.0", latest.Major, latest.Minor), nil
}
