package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	"github.com/capx-io/capx/test/images"
)

// Repository is a clusterctl local provider repository and the clusterctl config naming it:
//
//	<Dir>/clusterctl.yaml
//	<Dir>/cluster-api/<version>/core-components.yaml, metadata.yaml
//	<Dir>/infrastructure-capx/<version>/infrastructure-components.yaml, metadata.yaml, cluster-template-<flavor>.yaml
//	<Dir>/cert-manager/<version>/cert-manager.yaml (the stub, see certManagerStub)
//
// Every clusterctl command run with `--config <Dir>/clusterctl.yaml` finds the providers there
// (file:// URLs) and never goes to the network; CLUSTERCTL_DISABLE_VERSIONCHECK stops its
// release check.
type Repository struct {
	Dir                          string
	CAPIVersion, ProviderVersion string
	clusterctl                   string
}

// OpenRepository opens the repository NewKit wrote under <WorkDir>/clusterctl, for commands
// that need only its config (describe, move).
func OpenRepository(p Paths) *Repository {
	return &Repository{Dir: filepath.Join(p.WorkDir, "clusterctl"), clusterctl: p.Clusterctl()}
}

// Config is the clusterctl config file.
func (r *Repository) Config() string { return filepath.Join(r.Dir, "clusterctl.yaml") }

// CertManagerVersion is the cert-manager version the stub claims: clusterctl's default, so that
// clusterctl sees nothing to upgrade.
const CertManagerVersion = "v1.21.1"

// WriteRepository writes the components as a clusterctl local repository into dir.
func WriteRepository(p Paths, dir string, c *Components) (*Repository, error) {
	r := &Repository{Dir: dir, CAPIVersion: c.CAPIVersion, ProviderVersion: c.ProviderVersion, clusterctl: p.Clusterctl()}
	core := filepath.Join(dir, CoreProvider, c.CAPIVersion)
	infra := filepath.Join(dir, clusterctlv1.ManifestLabel(Provider, clusterctlv1.InfrastructureProviderType), c.ProviderVersion)
	certManager := filepath.Join(dir, "cert-manager", CertManagerVersion)
	files := map[string][]byte{
		filepath.Join(core, "core-components.yaml"):            c.Core,
		filepath.Join(core, "metadata.yaml"):                   c.CoreMetadata,
		filepath.Join(infra, "infrastructure-components.yaml"): c.Provider,
		filepath.Join(infra, "metadata.yaml"):                  c.ProviderMetadata,
		filepath.Join(certManager, "cert-manager.yaml"):        []byte(certManagerStub),
		r.Config(): []byte(fmt.Sprintf(`# Written by test/e2e/install: a clusterctl config whose providers live in this folder.
providers:
- name: %[1]s
  type: CoreProvider
  url: file://%[2]s/core-components.yaml
- name: %[3]s
  type: InfrastructureProvider
  url: file://%[4]s/infrastructure-components.yaml
cert-manager:
  url: file://%[5]s/cert-manager.yaml
  version: %[6]s
`, CoreProvider, core, Provider, infra, certManager, CertManagerVersion)),
	}
	for flavor, t := range c.Templates {
		name := "cluster-template.yaml"
		if flavor != "" {
			name = "cluster-template-" + flavor + ".yaml"
		}
		files[filepath.Join(infra, name)] = t
	}
	for path, b := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// certManagerStub is what the repository serves as cert-manager. `clusterctl init` always
// ensures cert-manager first: it creates a test Issuer and Certificate and, when that fails,
// installs cert-manager from its URL and retries. cert-manager's images cannot be pulled here,
// and nothing needs it (the components carry their certificates, see WithoutCertManager), so
// the stub defines only the two kinds that check creates: clusterctl installs it, the check
// passes, and no certificate is ever issued by it.
const certManagerStub = `# Not cert-manager: a stub with the two kinds clusterctl's cert-manager check creates.
# See test/e2e/install (certManagerStub) and docs/local-cluster.md.
apiVersion: v1
kind: Namespace
metadata:
  name: cert-manager
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: issuers.cert-manager.io
spec:
  group: cert-manager.io
  names: {kind: Issuer, listKind: IssuerList, plural: issuers, singular: issuer}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: certificates.cert-manager.io
spec:
  group: cert-manager.io
  names: {kind: Certificate, listKind: CertificateList, plural: certificates, singular: certificate}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// Clusterctl runs clusterctl with the repository's config against a kubeconfig and returns
// its stdout.
func (r *Repository) Clusterctl(ctx context.Context, kubeconfig string, args ...string) ([]byte, error) {
	args = append(args, "--config", r.Config(), "--kubeconfig", kubeconfig)
	return runIn(ctx, nil, []string{"CLUSTERCTL_DISABLE_VERSIONCHECK=true"}, r.clusterctl, args...)
}

// InstallWithClusterctl runs `clusterctl init` with the repository: Cluster API core and the
// capx providers, no bootstrap or control-plane provider. A cluster whose inventory already
// lists both is left as it is.
//
// When clusterctl init is skipped, the managers are still pointed at the images of this build
// (what `clusterctl upgrade` would do for a release): a rebuilt manager rolls out.
func (m *Management) InstallWithClusterctl(ctx context.Context, r *Repository, imgs *images.LocalSet) error {
	have, err := m.Inventory(ctx)
	if err != nil {
		return err
	}
	var names []string
	for _, p := range have {
		names = append(names, p.ProviderName)
	}
	sort.Strings(names)
	if strings.Join(names, ",") == strings.Join([]string{Provider, CoreProvider}, ",") {
		m.logf("clusterctl inventory already lists %s; not running clusterctl init", strings.Join(names, ", "))
		return m.setManagerImages(ctx, imgs)
	}
	start := time.Now()
	m.logf("clusterctl init --core %s:%s --infrastructure %s:%s --bootstrap - --control-plane - --config %s",
		CoreProvider, r.CAPIVersion, Provider, r.ProviderVersion, r.Config())
	out, err := r.Clusterctl(ctx, m.Kubeconfig(), "init",
		"--core", CoreProvider+":"+r.CAPIVersion,
		"--infrastructure", Provider+":"+r.ProviderVersion,
		"--bootstrap", "-", "--control-plane", "-")
	if err != nil {
		return fmt.Errorf("clusterctl init: %w\n%s", err, out)
	}
	m.logf("clusterctl init done (%.1fs)", time.Since(start).Seconds())
	return nil
}

// setManagerImages points both managers (and the CAPTF runner image) at the given images; a
// no-op when they already run them.
func (m *Management) setManagerImages(ctx context.Context, imgs *images.LocalSet) error {
	for _, args := range [][]string{
		{"-n", CoreNamespace, "set", "image", "deployment/capi-controller-manager", "manager=" + imgs.CAPIManager.Ref},
		{"-n", ProviderNamespace, "set", "image", "deployment/capx-controller-manager", "manager=" + imgs.Manager.Ref},
		{"-n", ProviderNamespace, "set", "env", "deployment/capx-controller-manager", "CAPX_RUNNER_IMAGE=" + imgs.Manager.Ref},
	} {
		if _, err := m.Kubectl(ctx, nil, args...); err != nil {
			return err
		}
	}
	return nil
}

// GenerateCluster renders a cluster template of the repository with `clusterctl generate
// cluster`, with extra variables in the environment.
func (m *Management) GenerateCluster(ctx context.Context, r *Repository, name, namespace, flavor string, workers int, vars map[string]string) ([]byte, error) {
	args := []string{"generate", "cluster", name,
		"--infrastructure", Provider + ":" + r.ProviderVersion,
		"--target-namespace", namespace,
		"--worker-machine-count", fmt.Sprint(workers)}
	if flavor != "" {
		args = append(args, "--flavor", flavor)
	}
	args = append(args, "--config", r.Config(), "--kubeconfig", m.Kubeconfig())
	env := []string{"CLUSTERCTL_DISABLE_VERSIONCHECK=true"}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return runIn(ctx, nil, env, r.clusterctl, args...)
}
