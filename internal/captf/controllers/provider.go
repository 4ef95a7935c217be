package controllers

import (
	"context"
	"fmt"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/captf/jobs"
)

// provider implements the shared plumbing's Provider for one CAPTF kind: the phases are the
// engine's, the kind supplies what differs.
type provider[T capi.Object] struct {
	*engine
	kind kind[T]
}

// ReconcileNormal runs the phases of a live object. Each phase observes (and records what it
// saw in the pass) or does one named piece of housekeeping; only decide decides, and only act
// carries the decision out.
func (r *provider[T]) ReconcileNormal(ctx context.Context, s *reconcileScope[T]) (ctrl.Result, error) {
	p, err := r.newPass(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	err = run(ctx, p,
		r.ensureManagerAccess, // housekeeping: the manager's own RoleBinding in the namespace, before any write
		r.listJobs,            // observe: the object's Jobs, and the running one
		r.bookkeep,            // housekeeping: record finished Jobs (adopt an applied state, record a plan)
		r.trackActiveJob,      // housekeeping: block-move and status.activeJob follow the running Job
		whileIdle( // while a Job runs, its state is not read: decide says the Job owns the object
			r.ensureRunnerRBAC,   // housekeeping: the runner's ServiceAccount and Roles
			r.readState,          // observe: the state, its lock and a retained state's origin
			r.adoptRetainedState, // housekeeping: take over a retained state the object was told to adopt
			r.repairOwners,       // housekeeping: the state's Secrets are owned by this object's UID
			r.backups,            // housekeeping: back up a new serial, prune; observe: the backups
			r.copyOffsite,        // housekeeping: copy complete backups off the cluster (--offsite-backup-url)
			r.readOutputs,        // observe: the module's outputs (the kind writes them onto the object)
			r.renderInputs,       // observe: the durable inputs and the inputs rendered now
			r.labelCredentials,   // housekeeping: the credentials Secret moves with the cluster when nothing else reads it
			r.copyHold,           // housekeeping: the object's copy of a state-not-persisted hold
			r.findPlan,           // observe: the plan of these inputs
			r.recordApproval,     // housekeeping: an approved plan's phase and Event
			r.countSlots,         // observe: the active Jobs against the caps
		),
		r.decide,     // decide.Next
		r.checkStart, // observe what a due operation's start needs, and decide.Next again
		r.act,        // carry the decision out
	)
	return p.result(), err
}

// ReconcileDelete runs the phases of a deleting object: the same, except that outputs are not
// mapped, nothing is backed up, a cluster waits for its dependents, and the decision is a
// destroy, a retain or letting the finalizer go.
func (r *provider[T]) ReconcileDelete(ctx context.Context, s *reconcileScope[T]) (bool, ctrl.Result, error) {
	p, err := r.newPass(ctx, s)
	if err != nil {
		return false, ctrl.Result{}, err
	}
	err = run(ctx, p,
		r.ensureManagerAccess,
		r.listJobs,
		r.bookkeep,
		r.trackActiveJob,
		whileIdle(
			r.findDependents,   // observe: a cluster's machines and pools, destroyed first
			r.ensureRunnerRBAC, // housekeeping: a copy destroying elsewhere has none yet (nsdelete.go)
			r.readState,
			r.observeNamespace, // observe: a namespace being deleted, and the copy that destroys elsewhere
			r.adoptRetainedState,
			r.repairOwners,
			r.backups,     // observe: the backups (a held deletion may restore one)
			r.copyOffsite, // observe: their offsite copies (none is made while deleting)
			r.renderInputs,
			r.copyHold,
			r.findPlan,
			r.recordApproval,
			r.countSlots,
		),
		r.decide,
		r.checkStart,
		r.act,
	)
	return p.done, p.result(), err
}

// ReconcilePaused only records finished Jobs: a paused object starts nothing and destroys
// nothing (clusterctl move copies and deletes paused objects), but a Job that finished must not
// lose its result, and block-move must clear once no Job runs. It writes the object's status
// and the objects that exist and creates or deletes nothing (decide.RecordedWhilePaused).
func (r *provider[T]) ReconcilePaused(ctx context.Context, s *reconcileScope[T]) (ctrl.Result, error) {
	p, err := r.newPass(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	err = run(ctx, p, r.listJobs, r.bookkeepPaused, r.trackActiveJob, r.decidePaused)
	return p.result(), err
}

// UpdateStatus computes the object's conditions from what the pass observed.
func (r *provider[T]) UpdateStatus(s *reconcileScope[T]) {
	if s.Observed == nil {
		return // no phase ran
	}
	updateStatus(s.Observed, r.kind)
}

// newPass starts a reconcile's record: the object's blocks, its owner identity, the cluster's
// TerraformCluster (defaults, exports) and the effective Job policy.
func (r *provider[T]) newPass(ctx context.Context, s *reconcileScope[T]) (*pass[T], error) {
	spec, status, init := r.kind.workspace(s.Object)
	clusterName := s.Object.GetLabels()[clusterv1.ClusterNameLabel]
	if s.Cluster != nil {
		clusterName = s.Cluster.Name
	}
	owner, err := jobs.OwnerOf(s.Object, clusterName)
	if err != nil {
		return nil, err
	}
	p := &pass[T]{scope: s, owner: owner, spec: spec, status: status, init: init}
	s.Observed = p
	if owner.Kind != captfv1.KindCluster {
		if p.tfCluster, err = r.terraformCluster(ctx, s.Cluster); err != nil {
			return nil, err
		}
	}
	var defaults *captfv1.JobPolicy
	if p.tfCluster != nil {
		if p.tfCluster.Spec.Defaults != nil {
			defaults = p.tfCluster.Spec.Defaults.Jobs
		}
		p.policy = jobs.Effective(spec.Jobs, defaults, p.tfCluster.Spec.Jobs)
	} else {
		p.policy = jobs.Effective(spec.Jobs)
	}
	return p, nil
}

// terraformCluster returns the Cluster's infrastructure when it is a TerraformCluster; nil when
// the Cluster is unknown or uses another provider.
func (r *provider[T]) terraformCluster(ctx context.Context, cluster *clusterv1.Cluster) (*captfv1.TerraformCluster, error) {
	if cluster == nil {
		return nil, nil
	}
	ref := cluster.Spec.InfrastructureRef
	if ref.Kind != captfv1.KindCluster || ref.APIGroup != captfv1.GroupVersion.Group {
		return nil, nil
	}
	tc := &captfv1.TerraformCluster{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}, tc); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, nil
		}
		return nil, fmt.Errorf("get TerraformCluster %s/%s: %w", cluster.Namespace, ref.Name, err)
	}
	return tc, nil
}

// adoptRetainedState takes over a state retained by an earlier object of the same name, when
// the object's captf.io/adopt-retained-state annotation names that object (readState holds on
// any other retained state).
func (r *provider[T]) adoptRetainedState(ctx context.Context, p *pass[T]) error {
	if from := retainedFrom(p); from != "" {
		return r.adoptRetained(ctx, p, from)
	}
	return nil
}
