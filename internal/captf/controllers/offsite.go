package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"

	"github.com/capx-io/capx/internal/captf/offsite"
	"github.com/capx-io/capx/internal/captf/state"
)

// maxOffsitePerPass bounds the copies one reconcile uploads; the rest follow on the next.
const maxOffsitePerPass = 2

// copyOffsite copies the object's complete backup sets that have no offsite copy yet to the
// manager's offsite target (housekeeping, after backups; nothing without
// --offsite-backup-url). A failure never fails the pass, so it never holds an apply: it is an
// Event, the object looks again after a growing wait (offsite.Uploader), and the in-cluster
// backup stays as it is. status.stateBackups[].offsite lists the copies.
func (r *provider[T]) copyOffsite(ctx context.Context, p *pass[T]) error {
	defer r.listOffsite(p)
	u := r.opts.Offsite
	if u == nil || !p.scope.Object.GetDeletionTimestamp().IsZero() {
		return nil
	}
	p.offsite = &offsiteOutcome{target: u.Target.String()}
	var pending []state.BackupSet
	for _, s := range p.backups {
		if s.Complete && s.Offsite() == "" {
			pending = append(pending, s)
		}
	}
	who := p.owner.Namespace + "/" + p.owner.Kind + "/" + p.owner.Name
	if len(pending) == 0 {
		u.Succeeded(who)
		return nil
	}
	now := r.clock.Now()
	if wait := u.Wait(who, now); wait > 0 {
		p.offsite.pending, p.offsite.failed = len(pending), u.LastError(who)
		p.requeueAfter(wait)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, offsite.Timeout)
	defer cancel()
	copied, err := r.uploadSets(ctx, p, u, pending[:min(len(pending), maxOffsitePerPass)])
	p.offsite.pending = len(pending) - copied
	if err != nil {
		wait := u.Failed(who, now, err)
		p.offsite.failed = err.Error()
		r.recorder.Eventf(p.scope.Object, corev1.EventTypeWarning, "OffsiteBackupFailed",
			"Copying state backups to %s failed; the in-cluster backups are kept, retrying in %s: %v", u.Target, wait, err)
		p.requeueAfter(wait)
		return nil
	}
	u.Succeeded(who)
	if p.offsite.pending > 0 {
		p.requeueAfter(time.Second) // the rest in the next pass
	}
	return nil
}

// offsiteOutcome is what a pass's offsite copying came to: the target, how many complete backup
// sets still have no copy, and the last failure (while its retry waits).
type offsiteOutcome struct {
	target  string
	pending int
	failed  string
}

// offsiteCondition is OffsiteBackupsCurrent from a pass's outcome; ok is false without
// --offsite-backup-url (the condition is not set).
func offsiteCondition(o *offsiteOutcome) (s metav1.ConditionStatus, reason, msg string, ok bool) {
	switch {
	case o == nil:
		return "", "", "", false
	case o.failed != "":
		return metav1.ConditionFalse, captfv1.OffsiteBackupFailedReason, fmt.Sprintf(
			"%d complete backup set(s) have no copy in %s; the last copy failed and is retried after a growing wait (the in-cluster backups are kept): %s",
			o.pending, o.target, o.failed), true
	case o.pending > 0:
		return metav1.ConditionUnknown, captfv1.OffsiteBackupsPendingReason,
			fmt.Sprintf("%d complete backup set(s) wait for their copy to %s", o.pending, o.target), true
	default:
		return metav1.ConditionTrue, captfv1.OffsiteBackupsCopiedReason, "Every complete backup set has a copy in " + o.target, true
	}
}

// uploadSets copies sets in order and says how many it copied before any failure.
func (r *provider[T]) uploadSets(ctx context.Context, p *pass[T], u *offsite.Uploader, sets []state.BackupSet) (int, error) {
	store, err := u.Store()
	if err != nil {
		return 0, err
	}
	obj := offsite.Object{Namespace: p.owner.Namespace, Kind: p.owner.Kind, Name: p.owner.Name}
	for n, s := range sets {
		data, err := state.BackupData(ctx, r.reader, p.owner.Namespace, s)
		if err != nil {
			return n, err
		}
		c, err := store.Upload(ctx, offsite.Copy{Object: obj, Serial: s.Serial, Lineage: s.Lineage, Digest: s.Digest,
			Resources: s.Resources, TakenAt: s.TakenAt, InputsHash: s.InputsHash}, data)
		if err != nil {
			return n, fmt.Errorf("backup %s (serial %d): %w", s.Name, s.Serial, err)
		}
		if err := state.RecordOffsite(ctx, r.client, p.owner.Namespace, s, c.Location); err != nil {
			return n, err
		}
		for j := range p.backups {
			if p.backups[j].Name == s.Name {
				p.backups[j].SetOffsite(c.Location)
			}
		}
		r.recorder.Eventf(p.scope.Object, corev1.EventTypeNormal, "OffsiteBackupStored", "Copied state backup %s (serial %d) to %s", s.Name, s.Serial, c.Location)
	}
	return len(sets), nil
}

// listOffsite writes each listed backup's offsite copy into status.stateBackups.
func (r *provider[T]) listOffsite(p *pass[T]) {
	where := map[string]string{}
	for _, s := range p.backups {
		where[s.Name] = s.Offsite()
	}
	for i := range p.status.StateBackups {
		p.status.StateBackups[i].Offsite = where[p.status.StateBackups[i].SecretName]
	}
}
