package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/inputs"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/outputs"
	"github.com/capx-io/capx/internal/captf/state"
)

// readState reads the backend's state Secrets and its lock. An unreadable state is an
// observation, not an error: the decision holds everything on it. Adopting a retained state,
// repairing owners and backups are phases of their own (provider.go).
func (r *provider[T]) readState(ctx context.Context, p *pass[T]) error {
	suffix := p.owner.StateSuffix()
	p.status.StateSecretSuffix = suffix
	snap, _, err := r.states.read(ctx, r.client, r.reader, p.owner.Namespace, suffix)
	switch reason := state.Reason(err); {
	case err == nil:
		p.snap = snap
		p.status.ObservedStateSerial = ptr.To(snap.Serial)
		p.status.StateResources = ptr.To(int32(snap.Resources))
	case reason != "":
		p.stateErr = err
	default:
		return err
	}
	if from := retainedFrom(p); from != "" {
		if p.scope.Object.GetAnnotations()[captfv1.AdoptRetainedStateAnnotation] != from {
			p.stateErr = &retainedError{uid: from}
			p.snap = nil
		}
	}
	return r.checkLock(ctx, p)
}

// repairOwners makes the object the owner of its backups and plan key (repairKept) and of an
// adopted state's Secrets again when they name an earlier UID (a management cluster restored
// from a backup, objects re-created by hand): the next garbage collection would otherwise take
// them, and the captf-state-protection admission policy holds it off until then.
// It runs only with no Job active and never
// while paused (readState does not run then), so clusterctl move is never raced. Adopt writes
// nothing when the owner reference is already right.
func (r *provider[T]) repairOwners(ctx context.Context, p *pass[T]) error {
	var retained *retainedError
	if errors.As(p.stateErr, &retained) {
		return nil // an earlier object's state and backups: not this object's until it adopts them
	}
	if err := r.repairKept(ctx, p); err != nil {
		return err
	}
	if p.snap == nil || p.snap.InputsHash == "" {
		return nil
	}
	if err := r.adoptState(ctx, p, p.snap.InputsHash, ""); err != nil {
		return err
	}
	stored, err := inputs.Read(ctx, r.client, p.owner)
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	_, err = inputs.Ensure(ctx, r.client, p.owner, stored.Rendered)
	return err
}

// retainedFrom is the UID of the earlier object that retained the state just read, when that
// is not this object.
func retainedFrom[T capi.Object](p *pass[T]) string {
	if p.snap == nil || p.snap.RetainedFrom() == string(p.owner.UID) {
		return ""
	}
	return p.snap.RetainedFrom()
}

// adoptRetained takes a retained state over, as the captf.io/adopt-retained-state annotation
// asks: the state, its backups and the durable inputs get this object as owner and lose the
// retained-from label. The state then reads as this object's own: what it recorded as applied
// is what the next decision compares the current inputs with.
func (r *provider[T]) adoptRetained(ctx context.Context, p *pass[T], from string) error {
	ref, err := state.OwnerReference(p.scope.Object, r.client.Scheme())
	if err != nil {
		return err
	}
	if err := state.AdoptRetained(ctx, r.client, p.owner.Namespace, p.owner.StateSuffix(), ref, inputs.SecretName(p.owner)); err != nil {
		return err
	}
	r.recorder.Eventf(p.scope.Object, corev1.EventTypeNormal, "RetainedStateAdopted",
		"Adopted the state retained by uid %s (serial %d, %d resources)", from, p.snap.Serial, p.snap.Resources)
	return nil
}

// retainedError is state kept by an earlier object of the same name with deletionPolicy Retain;
// a new object holds on it unless told to adopt it (see docs/captf/deletion.md).
type retainedError struct{ uid string }

func (e *retainedError) Error() string {
	return "the state was retained by an earlier object of this name (uid " + e.uid +
		"); adopt it with the annotation " + captfv1.AdoptRetainedStateAnnotation + "=" + e.uid +
		", or delete its Secrets (label " + captfv1.RetainedFromUIDLabel + "=" + e.uid + ") to start fresh"
}

// lockedError is a state lock held by someone other than this object's own runs. It holds the
// object even before a state exists (the backend's init would wait on the lock too).
type lockedError struct {
	who string
	// ours: the holder is one of this object's own Jobs (gone or finished) whose Pod still runs.
	ours string
}

func (e *lockedError) Error() string {
	if e.ours != "" {
		return fmt.Sprintf("state: the state lock is held by %q, a Pod of this object's earlier Job %s that is still running or terminating "+
			"(its Job is gone or finished); it is unlocked once that Pod has stopped", e.who, e.ours)
	}
	return fmt.Sprintf("state: the state lock is held by %q, which is not one of this object's runs: "+
		"it is never unlocked automatically; when you are sure nobody runs, unlock it with "+
		"`tofu force-unlock` against the same backend", e.who)
}

func reasonOf(err error) string {
	var re *retainedError
	var le *lockedError
	switch {
	case errors.As(err, &re):
		return captfv1.RetainedStateFoundReason
	case errors.As(err, &le):
		return captfv1.StateLockedReason
	}
	return state.Reason(err)
}

// checkLock reads the state lock. A lock held by one of this object's own runner Pods is stale
// only when neither its Job nor any Pod of that Job may still run (jobRuns); then the next Job
// force-unlocks it. Any other holder blocks.
func (r *provider[T]) checkLock(ctx context.Context, p *pass[T]) error {
	lock, err := state.ReadLock(ctx, r.reader, p.owner.Namespace, p.owner.StateSuffix())
	if err != nil {
		return err
	}
	p.lock = lock
	if !lock.Locked() {
		return nil
	}
	who := ""
	if lock.Info != nil {
		who = lock.Info.Who
	}
	holder, ours := jobs.ParseHolder(who)
	if !ours || !holder.IsFor(p.owner.Kind, p.owner.Name) || lock.Info == nil {
		p.stateErr = &lockedError{who: who}
		p.lockForeign = true
		return nil
	}
	alive, err := r.jobRuns(ctx, p.owner.Namespace, holder.String())
	if err != nil {
		return err
	}
	if alive {
		// Not the active Job (this pass would have stopped): a Job deleted while its Pod
		// stops. That Pod may still write the state; a new Job waits rather than break its lock.
		p.stateErr = &lockedError{who: who, ours: holder.String()}
		p.lockForeign = true
		return nil
	}
	p.unlockID = lock.Info.ID
	return nil
}

// jobRuns reports whether the named Job may still write the state: it exists and has not
// finished, or any of its Pods has not finished or is terminating. The Pods count on their own:
// a Job deleted while its Pod stops is gone at once, but the Pod may be saving state for its
// whole grace period, and breaking its lock then would make two writers of one state.
func (r *provider[T]) jobRuns(ctx context.Context, namespace, name string) (bool, error) {
	job := &batchv1.Job{}
	err := r.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, job)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return false, err
	case jobs.Classify(job) == jobs.PhaseActive:
		return true, nil
	}
	return jobs.PodsAlive(ctx, r.reader, namespace, name)
}

// backups takes a backup of a serial not backed up yet, prunes old ones and lists the rest.
func (r *provider[T]) backups(ctx context.Context, p *pass[T]) error {
	ns, suffix := p.owner.Namespace, p.owner.StateSuffix()
	sets, err := state.Backups(ctx, r.client, ns, suffix)
	if err != nil {
		return err
	}
	deleting := !p.scope.Object.GetDeletionTimestamp().IsZero()
	if p.snap != nil && !deleting && r.opts.StateBackups > 0 && !backedUp(sets, p.snap) {
		ref, err := state.OwnerReference(p.scope.Object, r.client.Scheme())
		if err != nil {
			return err
		}
		full, err := r.states.full(ctx, r.reader, p.snap)
		if err != nil {
			return err
		}
		if full != nil { // else the state changed since it was read: the next pass backs that up
			if _, err := state.Backup(ctx, r.client, full, ref, state.BackupOptions{Keep: r.opts.StateBackups, Now: r.clock.Now()}); err != nil {
				return fmt.Errorf("back up state serial %d: %w", p.snap.Serial, err)
			}
		}
		if sets, err = state.Backups(ctx, r.client, ns, suffix); err != nil {
			return err
		}
	}
	if len(sets) > max(r.opts.StateBackups, 0) && r.opts.StateBackups > 0 {
		if _, err := state.Prune(ctx, r.client, ns, suffix, r.opts.StateBackups); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Pruning state backups failed; retrying on the next reconcile")
		} else if sets, err = state.Backups(ctx, r.client, ns, suffix); err != nil {
			return err
		}
	}
	p.backups = sets
	p.status.StateBackups = state.StatusBackups(sets)
	return nil
}

// backedUp reports whether a complete backup of the snapshot's serial and content exists.
func backedUp(sets []state.BackupSet, snap *state.Snapshot) bool {
	return slices.ContainsFunc(sets, func(s state.BackupSet) bool {
		return s.Complete && s.Serial == snap.Serial && s.Digest == snap.Digest
	})
}

// adoptState records a successful apply or restore: the object owns the state's Secrets, the
// base Secret carries the inputs hash applied and the module image that applied it (image "":
// as it was), and the durable inputs Secret the applied marker.
func (r *provider[T]) adoptState(ctx context.Context, p *pass[T], inputsHash, image string) error {
	ref, err := state.OwnerReference(p.scope.Object, r.client.Scheme())
	if err != nil {
		return err
	}
	if err := state.Adopt(ctx, r.client, p.owner.Namespace, p.owner.StateSuffix(), ref, inputsHash, image); err != nil {
		return err
	}
	_, err = inputs.MarkApplied(ctx, r.client, p.owner)
	return client.IgnoreNotFound(err)
}

// readOutputs maps the module's outputs from the state (once per state: see stateCache) and lets
// the kind write them onto the object; then it latches provisioned.
func (r *provider[T]) readOutputs(ctx context.Context, p *pass[T]) error {
	if p.snap == nil {
		return nil
	}
	role, err := contract.RoleOf(p.owner.Kind)
	if err != nil {
		return err
	}
	opts := outputs.Options{EndpointFromUser: r.endpointFromUser(p)}
	out, err := r.states.outputs(ctx, r.reader, p.snap, opts, func(m map[string]state.Output) *outputs.Result {
		return outputs.Decode(role, m, opts)
	})
	if err != nil || out == nil {
		return err // nil: the state changed since it was read, and the change brings the object back
	}
	p.outputs = out
	r.kind.applyOutputs(p, p.outputs)
	p.status.Health = p.outputs.Health
	if provisionable(p) {
		p.init.Provisioned = ptr.To(true)
	}
	return nil
}

// provisionable is the provisioned rule: an adopted apply, valid required outputs, and health
// past pending. Once true it is latched and never re-evaluated.
func provisionable[T capi.Object](p *pass[T]) bool {
	if ptr.Deref(p.init.Provisioned, false) {
		return true
	}
	return p.snap != nil && p.snap.InputsHash != "" && p.outputs != nil &&
		p.outputs.Status() == outputs.Valid &&
		(p.outputs.Health == nil || p.outputs.Health.State != "pending")
}

func (r *provider[T]) endpointFromUser(p *pass[T]) bool {
	return p.owner.Kind == captfv1.KindCluster && p.scope.Object.GetAnnotations()[captfv1.EndpointSourceAnnotation] == "user"
}
