package controllers

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/leases"
)

// acquireLeases takes the leases a Job of op needs just before it is created: the object's run
// lease and, through the cluster operation gate, the cluster's. holder is the Job's name, which
// is deterministic, so a crash between lease and Job finds its own lease again. A non-nil
// wait is a lease the Job cannot have now.
func (r *provider[T]) acquireLeases(ctx context.Context, p *pass[T], holder string, op captfv1.Operation) (*leases.Wait, error) {
	return r.leases.Take(ctx, leases.Request{
		Owner: p.owner, Holder: holder, Op: string(op),
		ActiveDeadlineSeconds: p.policy.ActiveDeadlineSeconds, Gate: r.opts.ClusterOperationGate,
	})
}

// releaseLeases gives back the leases a finished (or never created) Job held. With no holder it
// deletes the object's leases outright, at cleanup.
func (r *provider[T]) releaseLeases(ctx context.Context, p *pass[T], holder string) error {
	if holder != "" {
		return r.leases.Release(ctx, p.owner, holder)
	}
	names := []string{leases.RunLeaseName(p.owner)}
	if p.owner.Kind == captfv1.KindCluster && p.owner.ClusterName != "" {
		names = append(names, leases.ClusterLeaseName(p.owner.Namespace, p.owner.ClusterName))
	}
	for _, name := range names {
		l := &coordinationv1.Lease{}
		l.Namespace, l.Name = p.owner.Namespace, name
		if err := r.client.Delete(ctx, l); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}
