package capi

import (
	"context"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
)

// SetupOptions tune one kind's controller.
type SetupOptions struct {
	// WatchFilter, when set, limits the controller to objects labelled
	// cluster.x-k8s.io/watch-filter=<value>.
	WatchFilter string
	// Concurrency caps concurrent reconciles of the kind.
	Concurrency int
	// Extra adds the provider's own watches (Jobs, Secrets, ...).
	Extra func(*builder.Builder) *builder.Builder
}

// SetupWithManager registers the kind's controller with the watches its CAPI role needs: the
// object itself, its owner (whose events carry owner references and bootstrap readiness), and the
// Cluster's pause transitions.
func (r *Reconciler[T, O]) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts SetupOptions) error {
	obj := r.New()
	gvk, err := apiutil.GVKForObject(obj, mgr.GetScheme())
	if err != nil {
		return err
	}
	log := mgr.GetLogger().WithValues("controller", gvk.Kind)
	clusterToObjects, err := util.ClusterToTypedObjectsMapper(mgr.GetClient(), r.NewList(), mgr.GetScheme())
	if err != nil {
		return err
	}
	pauseTransitions := builder.WithPredicates(predicates.ClusterPausedTransitions(mgr.GetScheme(), log))

	b := ctrl.NewControllerManagedBy(mgr).
		For(obj).
		Named(gvk.Kind).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.Concurrency, 1)}).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, opts.WatchFilter)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(clusterToObjects), pauseTransitions)
	switch r.Role {
	case InfraCluster:
		b = b.Watches(&clusterv1.Cluster{},
			handler.EnqueueRequestsFromMapFunc(util.ClusterToInfrastructureMapFunc(ctx, gvk, mgr.GetClient(), r.New())))
	case InfraMachine:
		b = b.Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(util.MachineToInfrastructureMapFunc(gvk)))
	case InfraMachinePool:
		b = b.Watches(&clusterv1.MachinePool{},
			handler.EnqueueRequestsFromMapFunc(util.MachinePoolToInfrastructureMapFunc(ctx, gvk)))
	}
	if opts.Extra != nil {
		b = opts.Extra(b)
	}
	return b.Complete(r)
}
