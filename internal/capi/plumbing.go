package capi

import (
	"context"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
)

// PlumbingOnly is a Provider with no phases of its own (and so nothing observed: its record is
// struct{}): a kind wired with it runs just the shared checklist (owners, pause, finalizer,
// patch, delete). It is how a kind is registered before its provider's phases exist, and the
// reference the shared plumbing is tested with.
type PlumbingOnly[T Object] struct{}

// ReconcileNormal does nothing.
func (PlumbingOnly[T]) ReconcileNormal(context.Context, *Scope[T, struct{}]) (ctrl.Result, error) {
	return ctrl.Result{}, nil
}

// ReconcileDelete has nothing to tear down.
func (PlumbingOnly[T]) ReconcileDelete(context.Context, *Scope[T, struct{}]) (bool, ctrl.Result, error) {
	return true, ctrl.Result{}, nil
}

// UpdateStatus summarises the shared conditions into Ready.
func (PlumbingOnly[T]) UpdateStatus(s *Scope[T, struct{}]) {
	both := []string{clusterv1.DeletingCondition, clusterv1.PausedCondition}
	SetReady(s.Object, both, both)
}
