package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
)

// Owner identifies the CAPTF object that Jobs, Secrets and Leases belong to. Every object the
// CAPTF packages create for it is labelled and owned from these few fields, so the inputs,
// jobs and leases packages agree on them by construction.
type Owner struct {
	// Kind is captfv1.KindCluster, KindMachine or KindMachinePool.
	Kind string
	// Namespace and Name of the CAPTF object.
	Namespace, Name string
	// UID of the CAPTF object, for owner references.
	UID types.UID
	// ClusterName is the CAPI Cluster the object belongs to.
	ClusterName string
	// WatchFilter is the object's cluster.x-k8s.io/watch-filter label: a manager started with
	// --watch-filter gets the events of labelled objects only, so its Jobs carry it too (without
	// it a finished Job was seen at the next recheck, a minute later, not at once).
	WatchFilter string
}

// OwnerOf returns the Owner of a TerraformCluster, TerraformMachine or TerraformMachinePool.
// The kind comes from the Go type, not from TypeMeta, which objects read through a client
// usually leave empty.
func OwnerOf(obj client.Object, clusterName string) (Owner, error) {
	k, ok := captfv1.KindOf(obj)
	if !ok {
		return Owner{}, fmt.Errorf("jobs: %T is not a CAPTF kind", obj)
	}
	return Owner{
		Kind: k.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(), ClusterName: clusterName,
		WatchFilter: obj.GetLabels()[clusterv1.WatchLabel],
	}, nil
}

// StateSuffix is the kubernetes backend's secret_suffix of the owner's state.
func (o Owner) StateSuffix() string { return contract.StateSuffix(o.Namespace, o.Kind, o.Name) }

// Labels are the labels of every object the manager creates for the owner: the managed label
// (the manager's cache selects on it), the owner's kind and name (so an object's Jobs, Secrets
// and Leases are found by a label selector) and the CAPI cluster name.
func (o Owner) Labels() map[string]string {
	l := map[string]string{
		captfv1.ManagedLabel:   "true",
		captfv1.OwnerKindLabel: o.Kind,
		captfv1.OwnerNameLabel: OwnerNameValue(o.Name),
	}
	if o.ClusterName != "" {
		l[clusterv1.ClusterNameLabel] = o.ClusterName
	}
	return l
}

// MoveLabels are Labels plus clusterctl's move label, for the Secrets and Leases that must
// travel with the object on clusterctl move.
func (o Owner) MoveLabels() map[string]string {
	l := o.Labels()
	l[clusterctlv1.ClusterctlMoveLabel] = ""
	return l
}

// Selector selects what Labels labelled. It leaves out the cluster name, which an object
// created before its cluster was known may lack.
func (o Owner) Selector() client.MatchingLabels {
	return client.MatchingLabels{
		captfv1.ManagedLabel:   "true",
		captfv1.OwnerKindLabel: o.Kind,
		captfv1.OwnerNameLabel: OwnerNameValue(o.Name),
	}
}

// ControllerRef is the controller owner reference to the CAPTF object. It blocks the owner's
// deletion while the dependent exists (the manager may update the owner's finalizers, which
// OwnerReferencesPermissionEnforcement requires for that).
func (o Owner) ControllerRef() metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         captfv1.GroupVersion.String(),
		Kind:               o.Kind,
		Name:               o.Name,
		UID:                o.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// IsOwnedBy reports whether ref points at the owner's kind and name (any UID: after a
// management cluster is restored from a backup the UID differs, and owner repair fixes it).
func (o Owner) IsOwnedBy(ref metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == captfv1.GroupVersion.Group && ref.Kind == o.Kind && ref.Name == o.Name
}

// OwnerNameValue is the owner-name label value of an object name: the name itself when it fits
// a label value (63 characters), else the first 16 hex characters of its sha256.
func OwnerNameValue(name string) string {
	if len(name) <= 63 {
		return name
	}
	return hash16(name)
}

func hash16(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:16]
}
