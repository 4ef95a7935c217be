// Package controllers wires the CAPVCO kinds into the shared CAPI plumbing (internal/capi). Each
// kind's provider writes only its own phases; the checklist (owners, pause, finalizer, the single
// patch, delete or normal) is internal/capi's.
package controllers

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
)

// Options configure the CAPVCO controllers.
type Options struct {
	// WatchFilter limits the controllers to objects with this watch-filter label value.
	WatchFilter string
	// ClusterConcurrency and MachineConcurrency cap concurrent reconciles per kind.
	ClusterConcurrency, MachineConcurrency int
}

// Setup registers the CAPVCO controllers with the manager.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	c := mgr.GetClient()
	if err := (&capi.Reconciler[*capvcov1.VCOCluster]{
		Client: c, Role: capi.InfraCluster, Finalizer: capvcov1.VCOClusterFinalizer,
		New:      func() *capvcov1.VCOCluster { return &capvcov1.VCOCluster{} },
		NewList:  func() client.ObjectList { return &capvcov1.VCOClusterList{} },
		Provider: capi.PlumbingOnly[*capvcov1.VCOCluster]{},
	}).SetupWithManager(ctx, mgr, capi.SetupOptions{WatchFilter: opts.WatchFilter, Concurrency: opts.ClusterConcurrency}); err != nil {
		return err
	}
	return (&capi.Reconciler[*capvcov1.VCOMachine]{
		Client: c, Role: capi.InfraMachine, Finalizer: capvcov1.VCOMachineFinalizer,
		New:      func() *capvcov1.VCOMachine { return &capvcov1.VCOMachine{} },
		NewList:  func() client.ObjectList { return &capvcov1.VCOMachineList{} },
		Provider: capi.PlumbingOnly[*capvcov1.VCOMachine]{},
	}).SetupWithManager(ctx, mgr, capi.SetupOptions{WatchFilter: opts.WatchFilter, Concurrency: opts.MachineConcurrency})
}
