package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

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
		p.requeueAfter(wait)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, offsite.Timeout)
	defer cancel()
	err := r.uploadSets(ctx, p, u, pending[:min(len(pending), maxOffsitePerPass)])
	if err != nil {
		wait := u.Failed(who, now)
		r.recorder.Eventf(p.scope.Object, corev1.EventTypeWarning, "OffsiteBackupFailed",
			"Copying state backups to %s failed; the in-cluster backups are kept, retrying in %s: %v", u.Target, wait, err)
		p.requeueAfter(wait)
		return nil
	}
	u.Succeeded(who)
	if len(pending) > maxOffsitePerPass {
		p.requeueAfter(time.Second) // the rest in the next pass
	}
	return nil
}

func (r *provider[T]) uploadSets(ctx context.Context, p *pass[T], u *offsite.Uploader, sets []state.BackupSet) error {
	store, err := u.Store()
	if err != nil {
		return err
	}
	obj := offsite.Object{Namespace: p.owner.Namespace, Kind: p.owner.Kind, Name: p.owner.Name}
	for _, s := range sets {
		data, err := state.BackupData(ctx, r.reader, p.owner.Namespace, s)
		if err != nil {
			return err
		}
		c, err := store.Upload(ctx, offsite.Copy{Object: obj, Serial: s.Serial, Lineage: s.Lineage, Digest: s.Digest,
			Resources: s.Resources, TakenAt: s.TakenAt, InputsHash: s.InputsHash}, data)
		if err != nil {
			return fmt.Errorf("backup %s (serial %d): %w", s.Name, s.Serial, err)
		}
		if err := state.RecordOffsite(ctx, r.client, p.owner.Namespace, s, c.Location); err != nil {
			return err
		}
		for j := range p.backups {
			if p.backups[j].Name == s.Name {
				p.backups[j].SetOffsite(c.Location)
			}
		}
		r.recorder.Eventf(p.scope.Object, corev1.EventTypeNormal, "OffsiteBackupStored", "Copied state backup %s (serial %d) to %s", s.Name, s.Serial, c.Location)
	}
	return nil
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
