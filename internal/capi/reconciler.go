// Package capi is the Cluster API contract plumbing both providers share. Every InfraCluster,
// InfraMachine and InfraMachinePool reconcile runs the same fixed checklist, written once here:
//
//  1. fetch the object (gone, or deleting without this controller's finalizer: done);
//  2. look up its CAPI owner (Cluster, Machine or MachinePool) and the Cluster; while CAPI has not
//     set the owner yet, wait for the watch to bring the object back;
//  3. create the patch helper;
//  4. pause: Cluster.spec.paused or the cluster.x-k8s.io/paused annotation sets Paused=True and
//     stops there, or runs the provider's PausedProvider bookkeeping: a paused object is never
//     provisioned or destroyed, and nothing is created or deleted in its namespace, so
//     clusterctl move can copy and delete it safely (only its status, and what already exists,
//     may be written);
//  5. add the finalizer (a separate patch, before anything is provisioned);
//  6. defer one status patch with the conditions this controller owns;
//  7. branch: deleting runs the provider's delete phases and, once they report done, removes the
//     finalizer; otherwise the provider's normal phases run.
//
// A provider implements Provider for each kind and writes only its own phases. The scope is
// typed by the provider's record of a reconcile (O): its phases fill Scope.Observed in and its
// UpdateStatus reads it, with no type assertion between the two.
package capi

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Object is an infrastructure object with v1beta2 conditions.
type Object interface {
	client.Object
	conditions.Setter
}

// Role is the object's place in the CAPI contract.
type Role int

const (
	// InfraCluster is owned by a Cluster.
	InfraCluster Role = iota
	// InfraMachine is owned by a Machine.
	InfraMachine
	// InfraMachinePool is owned by a MachinePool.
	InfraMachinePool
)

func (r Role) String() string {
	return [...]string{"InfraCluster", "InfraMachine", "InfraMachinePool"}[r]
}

// Scope is what the shared checklist found for one reconcile of one object, and the provider's
// record (O) of what its phases observed.
type Scope[T Object, O any] struct {
	// Object being reconciled; the deferred patch writes its status and finalizers.
	Object T
	// Cluster owning the object (nil only while deleting after the Cluster is gone).
	Cluster *clusterv1.Cluster
	// Machine owning an InfraMachine.
	Machine *clusterv1.Machine
	// MachinePool owning an InfraMachinePool.
	MachinePool *clusterv1.MachinePool
	// Observed is the provider's own record of this reconcile: its phases fill it in, and its
	// UpdateStatus reads it (O's zero value when no phase ran).
	Observed O
}

// Deleting reports whether the object is being deleted.
func (s *Scope[T, O]) Deleting() bool { return !s.Object.GetDeletionTimestamp().IsZero() }

// Provider is what a provider writes for one kind; O is its record of one reconcile.
type Provider[T Object, O any] interface {
	// ReconcileNormal provisions and updates the infrastructure.
	ReconcileNormal(ctx context.Context, s *Scope[T, O]) (ctrl.Result, error)
	// ReconcileDelete tears the infrastructure down; done=true lets the finalizer go.
	ReconcileDelete(ctx context.Context, s *Scope[T, O]) (done bool, res ctrl.Result, err error)
	// UpdateStatus computes status (the Ready summary first of all) from what the phases
	// observed. It makes no API calls and runs once, just before the single patch.
	UpdateStatus(s *Scope[T, O])
}

// PausedProvider is implemented by providers with bookkeeping that is safe while paused, such as
// recording a finished Job; it must never create or destroy infrastructure, nor create or delete
// an object in the namespace (clusterctl move copies what it listed before it paused).
type PausedProvider[T Object, O any] interface {
	ReconcilePaused(ctx context.Context, s *Scope[T, O]) (ctrl.Result, error)
}

// Reconciler runs the checklist for one kind.
type Reconciler[T Object, O any] struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// Role of the kind.
	Role Role
	// Finalizer the kind carries while it has infrastructure.
	Finalizer string
	// New returns an empty object of the kind.
	New func() T
	// NewList returns an empty list of the kind.
	NewList func() client.ObjectList
	// Provider writes the kind's phases.
	Provider Provider[T, O]
	// OwnedConditions are the condition types the provider sets; Ready, Paused and Deleting are
	// always owned.
	OwnedConditions []string
}

// Reconcile runs the checklist.
func (r *Reconciler[T, O]) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	log := ctrl.LoggerFrom(ctx)
	obj := r.New()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() && !controllerutil.ContainsFinalizer(obj, r.Finalizer) {
		// Its infrastructure is gone (or was never made): another finalizer keeps the object.
		return ctrl.Result{}, nil
	}
	if r.Role == InfraCluster && annotations.IsExternallyManaged(obj) {
		log.V(4).Info("Skipping an externally managed object")
		return ctrl.Result{}, nil
	}

	scope, err := r.owners(ctx, obj)
	if err != nil || scope == nil {
		return ctrl.Result{}, err
	}
	if scope.Cluster != nil {
		log = log.WithValues("Cluster", klog.KObj(scope.Cluster))
		ctx = ctrl.LoggerInto(ctx, log)
	}

	helper, err := patch.NewHelper(obj, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}

	if paused, why := isPaused(scope.Cluster, obj); paused {
		conditions.Set(obj, pausedCondition(obj, why))
		if scope.Deleting() {
			conditions.Set(obj, deletingCondition(obj, "Deletion waits until the object is unpaused ("+why+")"))
		}
		res, err := r.reconcilePaused(ctx, scope)
		return res, kerrors.NewAggregate([]error{err, r.patch(ctx, helper, obj)})
	}
	conditions.Set(obj, pausedCondition(obj, ""))

	if !scope.Deleting() && controllerutil.AddFinalizer(obj, r.Finalizer) {
		// The finalizer lands before anything exists that it would have to protect.
		return ctrl.Result{}, r.patch(ctx, helper, obj)
	}

	defer func() {
		r.Provider.UpdateStatus(scope)
		reterr = kerrors.NewAggregate([]error{reterr, r.patch(ctx, helper, obj)})
	}()

	if scope.Deleting() {
		conditions.Set(obj, deletingCondition(obj, ""))
		done, res, err := r.Provider.ReconcileDelete(ctx, scope)
		if done && err == nil {
			log.Info("Removing the finalizer: the infrastructure is gone")
			controllerutil.RemoveFinalizer(obj, r.Finalizer)
		}
		return res, err
	}
	conditions.Set(obj, notDeletingCondition(obj))
	return r.Provider.ReconcileNormal(ctx, scope)
}

func (r *Reconciler[T, O]) reconcilePaused(ctx context.Context, s *Scope[T, O]) (ctrl.Result, error) {
	if p, ok := r.Provider.(PausedProvider[T, O]); ok {
		return p.ReconcilePaused(ctx, s)
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler[T, O]) patch(ctx context.Context, helper *patch.Helper, obj T) error {
	owned := append([]string{ReadyCondition, clusterv1.PausedCondition, clusterv1.DeletingCondition}, r.OwnedConditions...)
	return helper.Patch(ctx, obj,
		patch.WithOwnedConditions{Conditions: owned},
		patch.WithStatusObservedGeneration{},
	)
}

// owners resolves the CAPI owner and the Cluster. It returns a nil scope (and no error) when the
// object must wait for CAPI to set its owner; the owner reference's update brings it back.
func (r *Reconciler[T, O]) owners(ctx context.Context, obj T) (*Scope[T, O], error) {
	log := ctrl.LoggerFrom(ctx)
	s := &Scope[T, O]{Object: obj}
	deleting := s.Deleting()
	meta := metav1.ObjectMeta{
		Namespace: obj.GetNamespace(), Name: obj.GetName(),
		Labels: obj.GetLabels(), OwnerReferences: obj.GetOwnerReferences(),
	}
	var err error
	switch r.Role {
	case InfraCluster:
		if s.Cluster, err = util.GetOwnerCluster(ctx, r.Client, meta); err != nil && !deleting {
			return nil, err
		}
		if s.Cluster == nil && !deleting {
			log.Info("Waiting for the Cluster controller to set the owner reference")
			return nil, nil
		}
		return s, nil
	case InfraMachine:
		if s.Machine, err = util.GetOwnerMachine(ctx, r.Client, meta); err != nil && !deleting {
			return nil, err
		}
		if s.Machine == nil {
			if deleting {
				return s, r.clusterFromLabel(ctx, s, meta)
			}
			log.Info("Waiting for the Machine controller to set the owner reference")
			return nil, nil
		}
		meta = s.Machine.ObjectMeta
	case InfraMachinePool:
		if s.MachinePool, err = util.GetOwnerMachinePool(ctx, r.Client, meta); err != nil && !deleting {
			return nil, err
		}
		if s.MachinePool == nil {
			if deleting {
				return s, r.clusterFromLabel(ctx, s, meta)
			}
			log.Info("Waiting for the MachinePool controller to set the owner reference")
			return nil, nil
		}
		meta = s.MachinePool.ObjectMeta
	}
	if err := r.clusterFromLabel(ctx, s, meta); err != nil {
		return nil, err
	}
	if s.Cluster == nil && !deleting {
		log.Info("Waiting for the Cluster to exist")
		return nil, nil
	}
	return s, nil
}

// clusterFromLabel finds the Cluster named by the cluster-name label; a missing Cluster is not an
// error here (a deletion proceeds without it; otherwise the caller waits).
func (r *Reconciler[T, O]) clusterFromLabel(ctx context.Context, s *Scope[T, O], meta metav1.ObjectMeta) error {
	name := meta.Labels[clusterv1.ClusterNameLabel]
	if name == "" {
		return nil
	}
	c := &clusterv1.Cluster{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: meta.Namespace, Name: name}, c); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("get Cluster %s/%s: %w", meta.Namespace, name, err)
	}
	s.Cluster = c
	return nil
}
