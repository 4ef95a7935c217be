package move

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlconfig "sigs.k8s.io/cluster-api/cmd/clusterctl/config"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// InventoryCRD is the name of clusterctl's inventory CRD.
const InventoryCRD = "providers.clusterctl.cluster.x-k8s.io"

// Provider is a provider as clusterctl's inventory knows it.
type Provider struct {
	// Name is clusterctl's provider name ("capx").
	Name string
	// Type is clusterctl's provider type.
	Type clusterctlv1.ProviderType
	// Namespace is where the provider is installed.
	Namespace string
	// CRDs are the provider's CRDs (plural.group) that clusterctl move must discover; a plugin
	// lists the kinds it cares about.
	CRDs []string
}

// Capx is this repository's provider: CAPTF and CAPVCO run in one manager, which clusterctl
// knows as the infrastructure provider "capx" in capx-system.
var Capx = Provider{Name: "capx", Type: clusterctlv1.InfrastructureProviderType, Namespace: "capx-system"}

// ManifestLabel is the provider's clusterctl manifest label ("infrastructure-capx"): the
// inventory object's name and the cluster.x-k8s.io/provider label value.
func (p Provider) ManifestLabel() string { return clusterctlv1.ManifestLabel(p.Name, p.Type) }

// InventoryObject is the Provider object clusterctl init writes for p at version.
func (p Provider) InventoryObject(version string) *clusterctlv1.Provider {
	return &clusterctlv1.Provider{
		TypeMeta: metav1.TypeMeta{APIVersion: clusterctlv1.GroupVersion.String(), Kind: "Provider"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace,
			Name:      p.ManifestLabel(),
			Labels: map[string]string{
				clusterctlv1.ClusterctlLabel:     "",
				clusterv1.ProviderNameLabel:      p.ManifestLabel(),
				clusterctlv1.ClusterctlCoreLabel: clusterctlv1.ClusterctlCoreLabelInventoryValue,
			},
		},
		ProviderName: p.Name,
		Type:         string(p.Type),
		Version:      version,
	}
}

// ValidateVersion refuses a version clusterctl could not compare (it parses inventory
// versions as semantic versions and fails the whole move on one it cannot parse).
func ValidateVersion(v string) error {
	if _, err := utilversion.ParseSemantic(v); err != nil {
		return fmt.Errorf("version %q is not a semantic version (v1.2.3) and clusterctl move would fail on it: %w", v, err)
	}
	return nil
}

// ChooseVersion picks the version to register when --version was not given: the manager's
// (m, or the error finding it), when it is a semantic version, as a release's Deployment
// carries one; else existing, the version the inventory already records, as clusterctl init or
// an earlier registration wrote it (a source build's image tag is its content, no version).
// from says where the version came from and, when the manager's was not used, why.
func ChooseVersion(m *cmdutil.ManagerVersion, managerErr error, existing string) (version, from string, err error) {
	var why string
	switch {
	case managerErr != nil:
		why = "the manager's version is unknown: " + managerErr.Error()
	case ValidateVersion(m.Version) == nil:
		return m.Version, fmt.Sprintf("the manager's Deployment %s/%s, image %s", m.Namespace, m.Deployment, m.Image), nil
	case m.Version == "":
		why = fmt.Sprintf("the manager's image %s has no tag and its Deployment no app.kubernetes.io/version label", m.Image)
	default:
		why = fmt.Sprintf("the manager's image %s is tagged %q, which is no version (a source build tags its images with their content)", m.Image, m.Version)
	}
	if existing != "" && ValidateVersion(existing) == nil {
		return existing, "kept from the inventory's existing entry; " + why, nil
	}
	if existing != "" {
		why += fmt.Sprintf("; the inventory's existing entry records %q, which is no semantic version either", existing)
	} else {
		why += "; the inventory has no entry for the provider yet"
	}
	return "", "", fmt.Errorf("cannot tell the provider's version: %s; pass --version with the release the components came from (e.g. --version v0.1.0)", why)
}

// InventoryVersion returns the version the cluster's inventory records for p, or "" when it
// has no entry (or clusterctl's inventory CRD is not installed).
func InventoryVersion(ctx context.Context, c client.Reader, p Provider) (string, error) {
	want := p.InventoryObject("")
	have := &clusterctlv1.Provider{}
	err := c.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case err == nil:
		return have.Version, nil
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return "", nil
	}
	return "", fmt.Errorf("read Provider %s/%s: %w", want.Namespace, want.Name, err)
}

// Change is one thing RegisterInventory did (or, with dryRun, would do).
type Change struct {
	// Object is "<kind> <namespace/>name".
	Object string `json:"object"`
	// Action is create, update, label or unchanged.
	Action string `json:"action"`
	// Detail says what changes.
	Detail string `json:"detail,omitempty"`
}

// RegisterInventory makes the cluster's inventory list p at version, as clusterctl init would
// have: it installs the inventory CRD from clusterctl's own manifest if it is missing, creates
// or updates p's Provider object, and labels p.CRDs for clusterctl (discovery and provider
// labels) where a label is missing. It is idempotent; with dryRun it changes nothing and
// returns what it would do.
func RegisterInventory(ctx context.Context, c client.Client, p Provider, version string, dryRun bool) ([]Change, error) {
	if err := ValidateVersion(version); err != nil {
		return nil, err
	}
	var changes []Change
	ch, err := ensureInventoryCRD(ctx, c, dryRun)
	if err != nil {
		return nil, err
	}
	changes = append(changes, ch...)

	want := p.InventoryObject(version)
	have := &clusterctlv1.Provider{}
	obj := fmt.Sprintf("Provider %s/%s", want.Namespace, want.Name)
	err = c.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err) || (err != nil && dryRun && len(ch) > 0):
		changes = append(changes, Change{Object: obj, Action: "create", Detail: fmt.Sprintf("providerName=%s type=%s version=%s", want.ProviderName, want.Type, version)})
		if !dryRun {
			if err := c.Create(ctx, want); err != nil {
				return changes, fmt.Errorf("create %s: %w", obj, err)
			}
		}
	case err != nil:
		return changes, fmt.Errorf("read %s: %w", obj, err)
	default:
		updated := have.DeepCopy()
		if updated.Labels == nil {
			updated.Labels = map[string]string{}
		}
		for k, v := range want.Labels {
			updated.Labels[k] = v
		}
		updated.ProviderName, updated.Type, updated.Version = want.ProviderName, want.Type, want.Version
		if updated.Version == have.Version && updated.ProviderName == have.ProviderName && updated.Type == have.Type && maps.Equal(updated.Labels, have.Labels) {
			changes = append(changes, Change{Object: obj, Action: "unchanged", Detail: "version " + version})
			break
		}
		detail := fmt.Sprintf("version %s -> %s", have.Version, version)
		changes = append(changes, Change{Object: obj, Action: "update", Detail: detail})
		if !dryRun {
			if err := c.Update(ctx, updated); err != nil {
				return changes, fmt.Errorf("update %s: %w", obj, err)
			}
		}
	}

	for _, name := range p.CRDs {
		ch, err := labelCRD(ctx, c, name, p.ManifestLabel(), dryRun)
		if err != nil {
			return changes, err
		}
		if ch != nil {
			changes = append(changes, *ch)
		}
	}
	return changes, nil
}

func ensureInventoryCRD(ctx context.Context, c client.Client, dryRun bool) ([]Change, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := c.Get(ctx, client.ObjectKey{Name: InventoryCRD}, crd)
	if err == nil {
		if !slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
			return v.Name == clusterctlv1.GroupVersion.Version && v.Served
		}) {
			return nil, fmt.Errorf("CRD %s does not serve %s; upgrade it with clusterctl", InventoryCRD, clusterctlv1.GroupVersion.Version)
		}
		return nil, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read CRD %s: %w", InventoryCRD, err)
	}
	objs, err := utilyaml.ToUnstructured(clusterctlconfig.ClusterctlAPIManifest)
	if err != nil {
		return nil, fmt.Errorf("parse clusterctl's inventory CRD: %w", err)
	}
	var changes []Change
	for i := range objs {
		o := &objs[i]
		changes = append(changes, Change{Object: o.GetKind() + " " + o.GetName(), Action: "create", Detail: "clusterctl's inventory CRD"})
		if dryRun {
			continue
		}
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return changes, fmt.Errorf("create %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		if o.GetKind() == "CustomResourceDefinition" {
			if err := waitEstablished(ctx, c, o); err != nil {
				return changes, err
			}
		}
	}
	return changes, nil
}

func waitEstablished(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: o.GetName()}, crd); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("wait for CRD %s to be established: %w", o.GetName(), err)
	}
	return nil
}

// labelCRD adds clusterctl's labels to a CRD where missing; a present label is left alone.
func labelCRD(ctx context.Context, c client.Client, name, manifestLabel string, dryRun bool) (*Change, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("CRD %s is not installed: install the provider's CRDs first", name)
		}
		return nil, fmt.Errorf("read CRD %s: %w", name, err)
	}
	patch := client.MergeFrom(crd.DeepCopy())
	var added []string
	if crd.Labels == nil {
		crd.Labels = map[string]string{}
	}
	if _, ok := crd.Labels[clusterctlv1.ClusterctlLabel]; !ok {
		crd.Labels[clusterctlv1.ClusterctlLabel] = ""
		added = append(added, clusterctlv1.ClusterctlLabel+"=")
	}
	if _, ok := crd.Labels[clusterv1.ProviderNameLabel]; !ok {
		crd.Labels[clusterv1.ProviderNameLabel] = manifestLabel
		added = append(added, clusterv1.ProviderNameLabel+"="+manifestLabel)
	}
	if len(added) == 0 {
		return nil, nil
	}
	ch := &Change{Object: "CustomResourceDefinition " + name, Action: "label", Detail: fmt.Sprint(added)}
	if dryRun {
		return ch, nil
	}
	if err := c.Patch(ctx, crd, patch); err != nil {
		return ch, fmt.Errorf("label CRD %s: %w", name, err)
	}
	return ch, nil
}
