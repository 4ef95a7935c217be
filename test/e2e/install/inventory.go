package install

import (
	"context"
	"fmt"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlconfig "sigs.k8s.io/cluster-api/cmd/clusterctl/config"
	"sigs.k8s.io/yaml"

	climove "github.com/capx-io/capx/internal/cli/move"
)

// InstallManifests installs Cluster API core and the providers from rendered components with
// kubectl, and registers both in clusterctl's inventory exactly as `clusterctl init` does: the
// inventory CRD, one Provider object per provider, and clusterctl's labels on every object, so
// that clusterctl (describe, move, upgrade) sees them as installed by it.
func (m *Management) InstallManifests(ctx context.Context, c *Components) error {
	inventoryCRD, err := ParseManifest(clusterctlconfig.ClusterctlAPIManifest)
	if err != nil {
		return err
	}
	labelAll(inventoryCRD, map[string]string{clusterctlv1.ClusterctlCoreLabel: clusterctlv1.ClusterctlCoreLabelInventoryValue})
	core, err := SubstituteDefaults(c.Core, nil)
	if err != nil {
		return fmt.Errorf("cluster-api core: %w", err)
	}
	provider, err := SubstituteDefaults(c.Provider, nil)
	if err != nil {
		return fmt.Errorf("providers: %w", err)
	}
	steps := []struct {
		what     string
		manifest Manifest
		raw      []byte
		provider string // clusterctl provider label, "" for the inventory CRD
	}{
		{what: "clusterctl inventory CRD", manifest: inventoryCRD},
		{what: "cluster-api core " + c.CAPIVersion, raw: core, provider: clusterctlv1.ManifestLabel(CoreProvider, clusterctlv1.CoreProviderType)},
		{what: "capx providers " + c.ProviderVersion, raw: provider, provider: clusterctlv1.ManifestLabel(Provider, clusterctlv1.InfrastructureProviderType)},
	}
	for _, s := range steps {
		if s.raw != nil {
			if s.manifest, err = ParseManifest(s.raw); err != nil {
				return fmt.Errorf("%s: %w", s.what, err)
			}
		}
		if s.provider != "" {
			labelAll(s.manifest, map[string]string{clusterctlv1.ClusterctlLabel: "", clusterv1.ProviderNameLabel: s.provider})
		}
		b, err := s.manifest.YAML()
		if err != nil {
			return err
		}
		if err := m.Apply(ctx, s.what, b); err != nil {
			return err
		}
		if s.provider == "" {
			// The Provider kind must be served before the inventory objects are applied.
			if _, err := m.Kubectl(ctx, nil, "wait", "--for=condition=Established", "--timeout=60s", "crd/providers.clusterctl.cluster.x-k8s.io"); err != nil {
				return err
			}
		}
	}
	inventory, err := inventoryYAML(
		// Exactly as clusterctl init writes them (internal/cli/move, which kubectl captf and
		// kubectl capvco move register-inventory write too).
		*climove.Provider{Name: CoreProvider, Type: clusterctlv1.CoreProviderType, Namespace: CoreNamespace}.InventoryObject(c.CAPIVersion),
		*climove.Provider{Name: Provider, Type: clusterctlv1.InfrastructureProviderType, Namespace: ProviderNamespace}.InventoryObject(c.ProviderVersion),
	)
	if err != nil {
		return err
	}
	return m.Apply(ctx, "clusterctl inventory", inventory)
}

func inventoryYAML(providers ...clusterctlv1.Provider) ([]byte, error) {
	var out []byte
	for _, p := range providers {
		b, err := yaml.Marshal(p)
		if err != nil {
			return nil, err
		}
		out = append(append(out, "---\n"...), b...)
	}
	return out, nil
}

// Inventory lists the providers in the cluster's clusterctl inventory (none when clusterctl's
// CRD is not installed).
func (m *Management) Inventory(ctx context.Context) ([]clusterctlv1.Provider, error) {
	list := &clusterctlv1.ProviderList{}
	if err := m.Client.List(ctx, list); err != nil {
		if isNoKind(err) {
			return nil, nil
		}
		return nil, err
	}
	return list.Items, nil
}

func labelAll(m Manifest, labels map[string]string) {
	for _, o := range m {
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		for k, v := range labels {
			l[k] = v
		}
		o.SetLabels(l)
	}
}
