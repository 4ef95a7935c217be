package controllers

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/capvco/gpu"
	"github.com/capx-io/capx/internal/capvco/gpuname"
	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/capvco/vm"
)

// ReconcileDelete stops and deletes the VM permanently, then releases the machine's vGPU
// reservations permanently.
func (r *machineProvider) ReconcileDelete(ctx context.Context, s *machineScope) (bool, ctrl.Result, error) {
	p := r.newPass(s)
	err := runMachine(ctx, p,
		r.findClusterForDelete, // observe: the VCOCluster; none means its teardown took everything
		r.leavePool,            // wait: a control plane out of the API server pool first
		r.connectForDelete,     // observe: the cluster credential's client
		r.deleteVM,             // act: the VM, permanently
		r.releaseMachineGPUs,   // act: the machine's reservations, permanently
	)
	if err == nil && !p.stop {
		p.done = true
	}
	return p.done, ctrl.Result{RequeueAfter: p.requeue}, err
}

// findClusterForDelete finds the machine's VCOCluster and site. Without a VCOCluster (the
// Cluster is gone, names none, or its VCOCluster is gone) the machine is done: the cluster's
// teardown deleted the cloudspaces and released every reservation of the cluster, this
// machine's included.
func (r *machineProvider) findClusterForDelete(ctx context.Context, p *machinePass) error {
	s, m := p.scope, p.m
	gone := func() error { p.done, p.stop = true, true; return nil }
	if s.Cluster == nil || !s.Cluster.Spec.InfrastructureRef.IsDefined() {
		return gone()
	}
	vc := &capvcov1.VCOCluster{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: s.Cluster.Spec.InfrastructureRef.Name}, vc)
	if apierrors.IsNotFound(err) {
		return gone()
	}
	if err != nil {
		return err
	}
	where := &site{cluster: vc}
	p.obs.csID = m.Status.CloudspaceID
	if st, ok := decide.SiteOf(decide.Sites(vc.Spec), m.Status.FailureDomain); ok {
		where.site = st
		if p.obs.csID == "" {
			p.obs.csID = cloudspaceStatus(vc, st.Name).ID
		}
	}
	p.obs.where = where
	return nil
}

// leavePool holds a control-plane machine's deletion until its VCOCluster has taken the
// machine's API server out of the load balancer's pool (decide.WaitsToLeavePool); the
// VCOCluster's status change brings the machine back.
func (r *machineProvider) leavePool(_ context.Context, p *machinePass) error {
	m, vc := p.m, p.obs.where.cluster
	if m.DeletionTimestamp == nil || !vc.DeletionTimestamp.IsZero() || vc.Status.LoadBalancer == nil {
		return nil
	}
	_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
	if !decide.WaitsToLeavePool(cp, internalIP(m.Status.Addresses), vc.Status.LoadBalancer.Members, m.DeletionTimestamp.Time, p.obs.now) {
		return nil
	}
	p.obs.deleting = "waiting for the VCOCluster to take this API server out of the load balancer's pool"
	p.stop = true
	p.requeueAfter(2 * time.Second)
	return nil
}

func (r *machineProvider) connectForDelete(ctx context.Context, p *machinePass) error {
	err := r.connect(ctx, p)
	if err != nil {
		p.obs.deleting = "the credential Secret is needed to delete the VM: " + err.Error()
	}
	return err
}

func (r *machineProvider) deleteVM(ctx context.Context, p *machinePass) error {
	if p.obs.csID == "" {
		return nil
	}
	p.obs.deleting = "stopping and deleting the VM permanently"
	_, err := vm.Delete(ctx, p.api, p.obs.csID, knownVMID(p.m), names.VM(p.m.Name))
	return p.deletingFailed(err)
}

func (r *machineProvider) releaseMachineGPUs(ctx context.Context, p *machinePass) error {
	m, loc := p.m, p.obs.where.site.Location
	if loc == "" || (m.Spec.GPU == nil && len(m.Status.GPUs) == 0) {
		return nil
	}
	p.obs.deleting = "releasing the vGPU reservations permanently"
	owner := gpuname.Owner{Namespace: m.Namespace, Cluster: clusterOfMachine(p.scope), Machine: m.Name}
	_, err := gpu.Release(ctx, p.api, loc, func(n string) bool { return gpuname.OwnedByMachine(n, owner) })
	return p.deletingFailed(err)
}

// deletingFailed adds err to what the Deleting condition says.
func (p *machinePass) deletingFailed(err error) error {
	if err != nil {
		p.obs.deleting += ": " + err.Error()
	}
	return err
}
