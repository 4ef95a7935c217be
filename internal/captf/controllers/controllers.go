// Package controllers wires the CAPTF kinds into the shared CAPI plumbing (internal/capi). Each
// kind's provider writes only its own phases; the checklist (owners, pause, finalizer, the single
// patch, delete or normal) is internal/capi's.
package controllers

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
)

// Options configure the CAPTF controllers.
type Options struct {
	// WatchFilter limits the controllers to objects with this watch-filter label value.
	WatchFilter string
	// ClusterConcurrency, MachineConcurrency and MachinePoolConcurrency cap concurrent
	// reconciles per kind (not Jobs).
	ClusterConcurrency, MachineConcurrency, MachinePoolConcurrency int
}

// Setup registers the CAPTF controllers with the manager.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	c := mgr.GetClient()
	if err := (&capi.Reconciler[*captfv1.TerraformCluster]{
		Client: c, Role: capi.InfraCluster, Finalizer: captfv1.TerraformClusterFinalizer,
		New:      func() *captfv1.TerraformCluster { return &captfv1.TerraformCluster{} },
		NewList:  func() client.ObjectList { return &captfv1.TerraformClusterList{} },
		Provider: capi.PlumbingOnly[*captfv1.TerraformCluster]{},
	}).SetupWithManager(ctx, mgr, capi.SetupOptions{WatchFilter: opts.WatchFilter, Concurrency: opts.ClusterConcurrency}); err != nil {
		return err
	}
	if err := (&capi.Reconciler[*captfv1.TerraformMachine]{
		Client: c, Role: capi.InfraMachine, Finalizer: captfv1.TerraformMachineFinalizer,
		New:      func() *captfv1.TerraformMachine { return &captfv1.TerraformMachine{} },
		NewList:  func() client.ObjectList { return &captfv1.TerraformMachineList{} },
		Provider: capi.PlumbingOnly[*captfv1.TerraformMachine]{},
	}).SetupWithManager(ctx, mgr, capi.SetupOptions{WatchFilter: opts.WatchFilter, Concurrency: opts.MachineConcurrency}); err != nil {
		return err
	}
	return (&capi.Reconciler[*captfv1.TerraformMachinePool]{
		Client: c, Role: capi.InfraMachinePool, Finalizer: captfv1.TerraformMachinePoolFinalizer,
		New:      func() *captfv1.TerraformMachinePool { return &captfv1.TerraformMachinePool{} },
		NewList:  func() client.ObjectList { return &captfv1.TerraformMachinePoolList{} },
		Provider: capi.PlumbingOnly[*captfv1.TerraformMachinePool]{},
	}).SetupWithManager(ctx, mgr, capi.SetupOptions{WatchFilter: opts.WatchFilter, Concurrency: opts.MachinePoolConcurrency})
}
