package addons

import (
	"errors"
	"fmt"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	csiconfig "github.com/capx-io/capx/internal/capvco/csi/config"
	csimanifests "github.com/capx-io/capx/internal/capvco/csi/manifests"
	"github.com/capx-io/capx/internal/vco"
)

// The kube-system Secrets the CSI driver mounts.
const (
	CSICredentialsSecret = "capvco-csi-credentials"
	CSIVaultTokenSecret  = "capvco-csi-vault-token"
)

// The CSI sidecars' default images: the kubernetes-csi releases the driver is tested with
// (override each with the manager's --capvco-addon-image <name>=<image>).
var csiSidecars = map[string]string{
	"csi-provisioner":           "registry.k8s.io/sig-storage/csi-provisioner:v5.2.0",
	"csi-attacher":              "registry.k8s.io/sig-storage/csi-attacher:v4.8.1",
	"csi-resizer":               "registry.k8s.io/sig-storage/csi-resizer:v1.13.2",
	"csi-snapshotter":           "registry.k8s.io/sig-storage/csi-snapshotter:v8.2.1",
	"csi-node-driver-registrar": "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.13.0",
}

// CSIDriver is capvco-csi-driver, in clusters that set spec.addons.csi. It carries
// spec.encryption into the driver's config: nothing else acts on spec.encryption.
type CSIDriver struct{}

// Name implements Addon.
func (CSIDriver) Name() string { return "csi-driver" }

// Render implements Addon: the manifests of internal/capvco/csi/manifests with the cluster's
// sites, spec.encryption and the manager's endpoint policy, a copy of the driver's
// location-scoped credential and, with vaultMode external, of the vault token.
func (CSIDriver) Render(s Settings) (Rendered, error) {
	vc := s.VCOCluster
	spec := vc.Spec.Addons.CSI
	if spec == nil {
		skip := "spec.addons.csi is not set"
		if vc.Spec.Encryption != nil {
			skip += ": spec.encryption is not acted on (only the CSI driver uses it)"
		}
		return Rendered{Skip: skip}, nil
	}
	enc, token, err := encryption(vc.Spec.Encryption)
	if err != nil {
		return Rendered{}, err
	}
	var sites []csiconfig.Site
	for _, site := range s.Sites() {
		sites = append(sites, csiconfig.Site{Name: site.Name, Location: site.Location, CloudspaceID: site.CloudspaceID})
	}
	img := func(name string) string { return s.ThirdPartyImage(name, csiSidecars[name]) }
	o := csimanifests.Options{
		Images: csimanifests.Images{Driver: s.Image("capvco-csi-driver"), Provisioner: img("csi-provisioner"), Attacher: img("csi-attacher"),
			Resizer: img("csi-resizer"), Snapshotter: img("csi-snapshotter"), Registrar: img("csi-node-driver-registrar")},
		CredentialsSecret: CSICredentialsSecret,
		Cluster:           csiconfig.Cluster{Namespace: vc.Namespace, Name: s.ClusterName},
		Sites:             sites, Encryption: enc, DefaultClass: spec.DefaultStorageClass,
		Platform: s.Platform,
	}
	secrets := []SecretCopy{{Namespace: "kube-system", Name: CSICredentialsSecret, From: spec.CredentialsSecretRef.Name,
		Field: "spec.addons.csi.credentialsSecretRef", Keys: credentialKeys, Required: []string{vco.SecretKeyURL, vco.SecretKeyCustomer}}}
	if token != "" {
		o.TransitTokenSecret = CSIVaultTokenSecret
		secrets = append(secrets, SecretCopy{Namespace: "kube-system", Name: CSIVaultTokenSecret, From: token,
			Field: "spec.encryption.vaultTokenSecretRef", Keys: []string{"token"}, Required: []string{"token"}})
	}
	stream, err := csimanifests.Render(o)
	objs, err := renderedObjects(stream, err)
	if err != nil {
		return Rendered{}, err
	}
	return Rendered{Objects: objs, Secrets: secrets}, nil
}

// encryption turns spec.encryption into the driver's config and the vault token's Secret.
func encryption(e *capvcov1.EncryptionSpec) (csiconfig.Encryption, string, error) {
	if e == nil || e.VaultMode == csiconfig.VaultNone {
		return csiconfig.Encryption{VaultMode: csiconfig.VaultNone}, "", nil
	}
	if e.VaultMode != csiconfig.VaultExternal {
		return csiconfig.Encryption{}, "", fmt.Errorf("spec.encryption.vaultMode %q: the CSI driver takes none or external", e.VaultMode)
	}
	var errs []error
	if e.TransitKey == "" {
		errs = append(errs, errors.New("spec.encryption.transitKey is empty: name the vault transit key that wraps the volume keys"))
	}
	if e.VaultTokenSecretRef == nil {
		errs = append(errs, errors.New("spec.encryption.vaultTokenSecretRef is not set: name the Secret whose key token holds a vault token allowed datakey and decrypt on the transit key"))
	}
	if len(errs) > 0 {
		return csiconfig.Encryption{}, "", fmt.Errorf("vaultMode external: %w", errors.Join(errs...))
	}
	return csiconfig.Encryption{VaultMode: csiconfig.VaultExternal, Transit: &csiconfig.Transit{
		Address: e.VaultAddress, Mount: e.TransitMount, Key: e.TransitKey, Namespace: e.VaultNamespace,
		TokenFile: "/set-by-the-manifests"}}, e.VaultTokenSecretRef.Name, nil
}
