// Package controllers is the CAPTF engine: the reconcile phases every TerraformCluster,
// TerraformMachine and TerraformMachinePool shares (engine.go and the *phase.go files), the
// per-kind differences (cluster.go, machine.go, machinepool.go), and their wiring into the shared
// CAPI plumbing (internal/capi), which owns the checklist around them: owners, pause, finalizer,
// the single patch, delete or normal.
package controllers

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/captf/leases"
)

// Options configure the CAPTF controllers.
type Options struct {
	// WatchFilter limits the controllers to objects with this watch-filter label value.
	WatchFilter string
	// Namespace limits the controllers to one namespace ("" for all), as the manager's cache.
	Namespace string
	// ClusterConcurrency, MachineConcurrency and MachinePoolConcurrency cap concurrent
	// reconciles per kind (not Jobs: see EngineOptions.MaxActiveJobs).
	ClusterConcurrency, MachineConcurrency, MachinePoolConcurrency int
	// Engine settings shared by every kind.
	Engine EngineOptions
}

// Setup registers the CAPTF controllers with the manager.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	e := &engine{
		client: metadataCached{Client: mgr.GetClient(), cache: mgr.GetCache()}, reader: mgr.GetAPIReader(),
		recorder: mgr.GetEventRecorderFor("captf"), clock: clock.RealClock{}, opts: opts.Engine,
	}
	if err := indexSecretLabels(ctx, mgr); err != nil {
		return err
	}
	if err := indexCredentials(ctx, mgr); err != nil {
		return err
	}
	if err := indexActiveJobs(ctx, mgr); err != nil {
		return err
	}
	if err := indexBootstrapSecrets(ctx, mgr); err != nil {
		return err
	}
	e.leases = leases.New(e.client, e.reader, e.clock)
	e.states = newStateCache(opts.Engine.StateEncryption.master())
	e.refusals = newRefusals()
	var err error
	if e.approvals, err = newApprovalGuard(mgr.GetClient()); err != nil {
		return err
	}
	if err := mgr.Add(checkApprovalsAtStart(e.approvals)); err != nil {
		return err
	}
	// A finished Job, a decided plan and a new state serial (written by the Job's runtime, or
	// adopted) each bring the object back. The manager caches only the metadata of the Secrets
	// it labels, never their data: any module can write Secrets with the managed label, as many
	// and as large as its namespace allows. State data is fetched live when the metadata says
	// a state changed (stateCache); other Secrets are read live when needed.
	owned := func(k captfv1.KindInfo) func(b *builder.Builder) *builder.Builder {
		return func(b *builder.Builder) *builder.Builder {
			// A copy destroying elsewhere (nsdelete.go) brings back the object it destroys for.
			return b.Owns(&batchv1.Job{}).Owns(&captfv1.TerraformPlan{}).
				WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(stateOwner(k.Kind))).
				Watches(k.New(), handler.EnqueueRequestsFromMapFunc(toOriginal(k.Kind, opts.Engine.DestroyNamespacePrefix)))
		}
	}
	cluster, machine, pool := kindInfo(captfv1.KindCluster), kindInfo(captfv1.KindMachine), kindInfo(captfv1.KindMachinePool)
	// Machines and pools wait for their TerraformCluster: its provisioning (and new exports)
	// must bring them back.
	fromCluster := func(k captfv1.KindInfo) func(*builder.Builder) *builder.Builder {
		return func(b *builder.Builder) *builder.Builder {
			return owned(k)(b).Watches(&captfv1.TerraformCluster{}, handler.EnqueueRequestsFromMapFunc(
				func(ctx context.Context, o client.Object) []reconcile.Request {
					return objectsOfCluster(ctx, e.client, o, k.NewList())
				}))
		}
	}
	// A variablesFrom source created, fixed or opted in brings back the objects that name it.
	vc, err := newVariablesCache(mgr, opts.Namespace)
	if err != nil {
		return err
	}
	// A bootstrap Secret created or rotated brings back the machines and pools that pass it.
	bc, err := newBootstrapCache(mgr, opts.Namespace)
	if err != nil {
		return err
	}
	setup := func(k captfv1.KindInfo, r setupper, concurrency int, extra func(*builder.Builder) *builder.Builder) error {
		return r.SetupWithManager(ctx, mgr, capi.SetupOptions{WatchFilter: opts.WatchFilter, Concurrency: concurrency,
			Extra: func(b *builder.Builder) *builder.Builder { return watchVariables(vc, e.client, k.NewList)(extra(b)) }})
	}
	// A deleting TerraformCluster waits for its machines and pools: each one gone (or starting
	// to go) brings it back at once, rather than at its next requeue.
	toCluster := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return clustersOf(ctx, e.client, o)
	})
	dependents := func(b *builder.Builder) *builder.Builder {
		return owned(cluster)(b).
			Watches(&captfv1.TerraformMachine{}, toCluster, builder.WithPredicates(leaving)).
			Watches(&captfv1.TerraformMachinePool{}, toCluster, builder.WithPredicates(leaving))
	}
	if err := (&namespaces{reader: e.reader, client: e.client, prefix: opts.Engine.DestroyNamespacePrefix, source: opts.Namespace}).setup(mgr); err != nil {
		return err
	}
	if err := setup(cluster, reconcilerOf(e, cluster, capi.InfraCluster, kind[*captfv1.TerraformCluster](clusterKind{})),
		opts.ClusterConcurrency, dependents); err != nil {
		return err
	}
	if err := setup(machine, reconcilerOf(e, machine, capi.InfraMachine, kind[*captfv1.TerraformMachine](machineKind{})),
		opts.MachineConcurrency, chain(fromCluster(machine), watchBootstrap(bc, e.client, machine.Kind, machineConsumers))); err != nil {
		return err
	}
	return setup(pool, reconcilerOf(e, pool, capi.InfraMachinePool, kind[*captfv1.TerraformMachinePool](machinePoolKind{})),
		opts.MachinePoolConcurrency, chain(fromCluster(pool), watchBootstrap(bc, e.client, pool.Kind, poolConsumers), watchPoolMachines(e.client)))
}

// setupper is a reconciler of one kind, ready to be set up with the manager.
type setupper interface {
	SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts capi.SetupOptions) error
}

// reconcilerOf is the shared CAPI plumbing (internal/capi) over the engine for one kind.
func reconcilerOf[T capi.Object](e *engine, info captfv1.KindInfo, role capi.Role, k kind[T]) *capi.Reconciler[T, *pass[T]] {
	return &capi.Reconciler[T, *pass[T]]{
		Client: e.client, Role: role, Finalizer: k.finalizer(),
		New:             func() T { return info.New().(T) },
		NewList:         func() client.ObjectList { return info.NewList() },
		Provider:        &provider[T]{engine: e, kind: k},
		OwnedConditions: ownedConditions,
	}
}

// kindInfo is the registry's entry of one of the three kinds.
func kindInfo(kind string) captfv1.KindInfo {
	k, ok := captfv1.LookupKind(kind)
	if !ok {
		panic("controllers: " + kind + " is not in captfv1.Kinds")
	}
	return k
}

// chain applies builder extensions in order.
func chain(extras ...func(*builder.Builder) *builder.Builder) func(*builder.Builder) *builder.Builder {
	return func(b *builder.Builder) *builder.Builder {
		for _, extra := range extras {
			b = extra(b)
		}
		return b
	}
}

// stateOwner maps a managed Secret (state chunk, backup, inputs) of the kind to its object: by
// owner reference when it has one, else by the owner-name label (exact below 64 characters).
func stateOwner(kind string) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		if o.GetLabels()[captfv1.OwnerKindLabel] != kind {
			return nil
		}
		for _, ref := range o.GetOwnerReferences() {
			if ref.Kind == kind {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}}}
			}
		}
		if name := o.GetLabels()[captfv1.OwnerNameLabel]; name != "" {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
		}
		return nil
	}
}

// leaving passes the events of an object that is going: its deletion starting and its removal.
var leaving = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// clustersOf maps a TerraformMachine or TerraformMachinePool to the TerraformClusters of its
// Cluster (by the cluster-name label, the one the cluster's dependents list reads).
func clustersOf(ctx context.Context, c client.Client, o client.Object) []reconcile.Request {
	name := o.GetLabels()[clusterLabel]
	if name == "" {
		return nil
	}
	list := &captfv1.TerraformClusterList{}
	if err := c.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterLabel: name}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// objectsOfCluster maps a TerraformCluster to the objects of its Cluster in list's kind.
func objectsOfCluster(ctx context.Context, c client.Client, tc client.Object, list client.ObjectList) []reconcile.Request {
	name := tc.GetLabels()[clusterLabel]
	if name == "" {
		return nil
	}
	if err := c.List(ctx, list, client.InNamespace(tc.GetNamespace()), client.MatchingLabels{clusterLabel: name}); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	_ = meta.EachListItem(list, func(item runtime.Object) error {
		if o, ok := item.(client.Object); ok {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
		return nil
	})
	return reqs
}

// metadataCached is the manager's client with Secret metadata read from the cache: the manager
// reads Secrets themselves live (it caches no Secret data), but lists of their metadata (state
// chunks, backups, owner references) come from the metadata informer the engine watches.
type metadataCached struct {
	client.Client
	cache client.Reader
}

func (c metadataCached) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return c.cache.Get(ctx, key, obj, opts...)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c metadataCached) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if m, ok := list.(*metav1.PartialObjectMetadataList); ok {
		if m.GroupVersionKind() == corev1.SchemeGroupVersion.WithKind("SecretList") {
			opts = indexedSecretList(opts)
		}
		return c.cache.List(ctx, list, opts...)
	}
	return c.Client.List(ctx, list, opts...)
}
