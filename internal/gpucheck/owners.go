package gpucheck

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
)

// Machine is what the management cluster says about one VCOMachine.
type Machine struct {
	Namespace string
	Name      string
	// Cluster is its cluster-name label ("" before CAPI set it).
	Cluster string
	// VMID is the VM it runs, once known.
	VMID *int64
	// Deleting is true while its finalizer still has work to do (it releases its own
	// reservations then).
	Deleting bool
}

// Owners is a snapshot of who can own reservations: every VCOMachine, and every cluster
// (a CAPI Cluster or a VCOCluster).
type Owners struct {
	machines map[types.NamespacedName]Machine
	clusters map[types.NamespacedName]bool
}

// NewOwners indexes machines and clusters.
func NewOwners(machines []Machine, clusters []types.NamespacedName) *Owners {
	o := &Owners{machines: map[types.NamespacedName]Machine{}, clusters: map[types.NamespacedName]bool{}}
	for _, m := range machines {
		o.machines[types.NamespacedName{Namespace: m.Namespace, Name: m.Name}] = m
	}
	for _, c := range clusters {
		o.clusters[c] = true
	}
	return o
}

// machine returns the live machine the owner names, or nil.
func (o *Owners) machine(ow *Owner) *Machine {
	m, ok := o.machines[types.NamespacedName{Namespace: ow.Namespace, Name: ow.Machine}]
	if !ok || !m.owns(ow) {
		return nil
	}
	return &m
}

// owns: a machine of another cluster with the same name does not own the reservation; a
// machine CAPI has not labelled yet is given the benefit of the doubt.
func (m Machine) owns(ow *Owner) bool { return m.Cluster == "" || m.Cluster == ow.Cluster }

func (o *Owners) cluster(ow *Owner) bool {
	return o.clusters[types.NamespacedName{Namespace: ow.Namespace, Name: ow.Cluster}]
}

// runsVM says whether any machine runs the VM with this id.
func (o *Owners) runsVM(id int) (Machine, bool) {
	for _, m := range o.machines {
		if m.VMID != nil && *m.VMID == int64(id) {
			return m, true
		}
	}
	return Machine{}, false
}

// ManagementCluster answers ownership questions.
type ManagementCluster interface {
	// Owners lists every VCOMachine and cluster.
	Owners(ctx context.Context) (*Owners, error)
	// Machine reads one VCOMachine afresh; nil when it does not exist.
	Machine(ctx context.Context, namespace, name string) (*Machine, error)
}

// Kube is the ManagementCluster behind a Kubernetes API (the caller's kubeconfig).
type Kube struct {
	Reader client.Reader
}

// Owners lists VCOMachines, VCOClusters and CAPI Clusters in every namespace. A management
// cluster without CAPI's CRDs simply has no Clusters.
func (k Kube) Owners(ctx context.Context) (*Owners, error) {
	var ms capvcov1.VCOMachineList
	if err := k.Reader.List(ctx, &ms); err != nil {
		return nil, fmt.Errorf("listing VCOMachines: %w", err)
	}
	machines := make([]Machine, 0, len(ms.Items))
	for i := range ms.Items {
		machines = append(machines, machineOf(&ms.Items[i]))
	}
	var clusters []types.NamespacedName
	var vcs capvcov1.VCOClusterList
	if err := k.Reader.List(ctx, &vcs); err != nil {
		return nil, fmt.Errorf("listing VCOClusters: %w", err)
	}
	for _, c := range vcs.Items {
		clusters = append(clusters, types.NamespacedName{Namespace: c.Namespace, Name: c.Name})
	}
	var cs clusterv1.ClusterList
	if err := k.Reader.List(ctx, &cs); err != nil && !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("listing Clusters: %w", err)
	}
	for _, c := range cs.Items {
		clusters = append(clusters, types.NamespacedName{Namespace: c.Namespace, Name: c.Name})
	}
	return NewOwners(machines, clusters), nil
}

// Machine reads one VCOMachine.
func (k Kube) Machine(ctx context.Context, namespace, name string) (*Machine, error) {
	var m capvcov1.VCOMachine
	if err := k.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &m); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading VCOMachine %s/%s: %w", namespace, name, err)
	}
	out := machineOf(&m)
	return &out, nil
}

func machineOf(m *capvcov1.VCOMachine) Machine {
	return Machine{Namespace: m.Namespace, Name: m.Name, Cluster: m.Labels[clusterv1.ClusterNameLabel],
		VMID: m.Status.VMID, Deleting: !m.DeletionTimestamp.IsZero()}
}
