package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// bootstrapCache holds the metadata of the Secrets that carry CAPI's cluster-name label, which
// CAPI's bootstrap contract requires of every bootstrap data Secret, and nothing else: the data
// is still read live when inputs are rendered. It exists so that a rotated bootstrap token (the
// same Secret with new data, hence a new resourceVersion) brings the pools that pass it back at
// once, instead of at their next membership refresh, and so that a machine waiting for its
// bootstrap Secret starts when it appears.
type bootstrapCache struct{ cache.Cache }

func newBootstrapCache(mgr ctrl.Manager, namespace string) (bootstrapCache, error) {
	named, err := labels.NewRequirement(clusterv1.ClusterNameLabel, selection.Exists, nil)
	if err != nil {
		return bootstrapCache{}, err
	}
	c, err := newSelectedCache(mgr, namespace, labels.NewSelector().Add(*named))
	return bootstrapCache{c}, err
}

// bootstrapConsumer is a CAPI object that names a bootstrap data Secret and the infrastructure
// object that renders it: a Machine with its TerraformMachine, a MachinePool with its
// TerraformMachinePool.
type bootstrapConsumer struct {
	dataSecretName string
	infrastructure clusterv1.ContractVersionedObjectReference
}

// bootstrapUsers names the CAPTF objects of kind whose CAPI owners pass the Secret secret as
// their bootstrap data.
func bootstrapUsers(kind, namespace, secret string, consumers []bootstrapConsumer) []reconcile.Request {
	var reqs []reconcile.Request
	for _, c := range consumers {
		ref := c.infrastructure
		if c.dataSecretName != secret || ref.Kind != kind || ref.APIGroup != captfv1.GroupVersion.Group || ref.Name == "" {
			continue
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: namespace, Name: ref.Name}})
	}
	return reqs
}

// watchBootstrap brings back the objects of a kind (TerraformMachine or TerraformMachinePool)
// whose Machine or MachinePool (listed by consumers) names a bootstrap Secret that was created
// or changed.
func watchBootstrap(bc bootstrapCache, c client.Client, kind string, consumers consumerLister) func(*builder.Builder) *builder.Builder {
	return func(b *builder.Builder) *builder.Builder {
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		return b.WatchesRawSource(source.Kind(bc, meta, handler.TypedEnqueueRequestsFromMapFunc(
			func(ctx context.Context, o *metav1.PartialObjectMetadata) []reconcile.Request {
				list, err := consumers(ctx, c, o.Namespace, o.Name)
				if err != nil {
					return nil
				}
				return bootstrapUsers(kind, o.Namespace, o.Name, list)
			})))
	}
}

// consumerLister lists a namespace's bootstrapConsumers of one kind that name a bootstrap
// Secret. Both listers read the manager's cache, which the CAPI plumbing's owner watches fill,
// through bootstrapSecretIndex: a Secret's event reads the objects that name it, not every
// Machine of the namespace.
type consumerLister func(ctx context.Context, c client.Client, namespace, secret string) ([]bootstrapConsumer, error)

// bootstrapSecretIndex indexes the cached Machines and MachinePools by the bootstrap data
// Secret they name.
const bootstrapSecretIndex = "captf.io/bootstrap-data-secret"

// indexBootstrapSecrets registers bootstrapSecretIndex on the Machine and MachinePool informers.
func indexBootstrapSecrets(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &clusterv1.Machine{}, bootstrapSecretIndex, machineBootstrapSecret); err != nil {
		return err
	}
	return mgr.GetFieldIndexer().IndexField(ctx, &clusterv1.MachinePool{}, bootstrapSecretIndex, poolBootstrapSecret)
}

func machineBootstrapSecret(o client.Object) []string {
	if m, ok := o.(*clusterv1.Machine); ok && ptr.Deref(m.Spec.Bootstrap.DataSecretName, "") != "" {
		return []string{*m.Spec.Bootstrap.DataSecretName}
	}
	return nil
}

func poolBootstrapSecret(o client.Object) []string {
	if mp, ok := o.(*clusterv1.MachinePool); ok && ptr.Deref(mp.Spec.Template.Spec.Bootstrap.DataSecretName, "") != "" {
		return []string{*mp.Spec.Template.Spec.Bootstrap.DataSecretName}
	}
	return nil
}

// machineConsumers lists the namespace's Machines that name the Secret.
func machineConsumers(ctx context.Context, c client.Client, namespace, secret string) ([]bootstrapConsumer, error) {
	list := &clusterv1.MachineList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{bootstrapSecretIndex: secret}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]bootstrapConsumer, 0, len(list.Items))
	for _, m := range list.Items {
		out = append(out, bootstrapConsumer{ptr.Deref(m.Spec.Bootstrap.DataSecretName, ""), m.Spec.InfrastructureRef})
	}
	return out, nil
}

// poolConsumers lists the namespace's MachinePools that name the Secret.
func poolConsumers(ctx context.Context, c client.Client, namespace, secret string) ([]bootstrapConsumer, error) {
	list := &clusterv1.MachinePoolList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{bootstrapSecretIndex: secret}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]bootstrapConsumer, 0, len(list.Items))
	for _, mp := range list.Items {
		out = append(out, bootstrapConsumer{ptr.Deref(mp.Spec.Template.Spec.Bootstrap.DataSecretName, ""), mp.Spec.Template.Spec.InfrastructureRef})
	}
	return out, nil
}
