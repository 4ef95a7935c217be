package leases

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/jobs"
)

// Observation is what the leases a Job of an object needs look like now. Each wait is nil when
// that lease would not hold the Job back.
type Observation struct {
	// Run is set while the object's run lease is held by a Job of the object that still runs
	// (or a Pod of one that is gone still stops). A holder that does not exist is not waited
	// for: it was named by an earlier pass of the object that ended without creating it, and
	// Take takes the lease over (or resumes it, when it names the same Job).
	Run *Wait
	// Cluster (machines and pools, under the gate) is set while the cluster's operation lease
	// is held.
	Cluster *Wait
	// Members (clusters, under the gate) is set while mutating Jobs of the cluster's machines
	// and pools hold their run leases.
	Members *Wait
}

// Observe reads the leases a Job of o would take, live and without writing anything, so that
// the decision to start a Job can weigh them before act takes them. Take stays the authority:
// two objects that observe together may both see nothing, and then Take's write-before-read
// order lets at most one of them through.
func (l *Leases) Observe(ctx context.Context, o jobs.Owner, gate bool) (Observation, error) {
	var obs Observation
	run, err := l.runHeld(ctx, o)
	if err != nil {
		return obs, err
	}
	obs.Run = run
	if !gate || o.ClusterName == "" {
		return obs, nil
	}
	if o.Kind == captfv1.KindCluster {
		obs.Members, err = l.waitForMembers(ctx, o)
		return obs, err
	}
	name := ClusterLeaseName(o.Namespace, o.ClusterName)
	lease, live, err := l.read(ctx, o.Namespace, name)
	if err != nil || !live {
		return obs, err
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	obs.Cluster = &Wait{
		Reason:  captfv1.WaitingForClusterOperationReason,
		Message: fmt.Sprintf("Waiting for the TerraformCluster's Job %s to finish (Lease %s)", holder, name),
		Holders: []string{holder},
	}
	return obs, nil
}

// runHeld reads the object's run lease as its taker sees it (holds).
func (l *Leases) runHeld(ctx context.Context, o jobs.Owner) (*Wait, error) {
	name := RunLeaseName(o)
	lease := &coordinationv1.Lease{}
	if err := l.reader.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: name}, lease); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("leases: read Lease %s/%s: %w", o.Namespace, name, err)
	}
	return l.holds(ctx, lease)
}
