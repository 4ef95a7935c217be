package controllers

import (
	"context"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/decide"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/state"
)

// defaultMembershipInterval is how often a pool's instances are refreshed by default.
const defaultMembershipInterval = 60 * time.Second

// decide gathers what the pass observed into decide.Input and asks decide.Next.
func (r *provider[T]) decide(ctx context.Context, p *pass[T]) error {
	in := decide.Input{
		Now:                    r.clock.Now(),
		UID:                    string(p.owner.UID),
		Mutable:                r.kind.mutable(),
		Deleting:               !p.scope.Object.GetDeletionTimestamp().IsZero(),
		DeletionPolicy:         p.spec.DeletionPolicy,
		DependentsExist:        len(p.dependents) > 0,
		State:                  stateView(p),
		EverApplied:            ptr.Deref(p.init.Provisioned, false) || (p.stored != nil && p.stored.Applied) || len(p.backups) > 0,
		InputsWait:             p.inputsWait,
		DurableInputs:          p.stored != nil,
		ApplyPolicy:            p.spec.ApplyPolicy,
		FailedJobsHistoryLimit: int(p.policy.FailedJobsHistoryLimit),
		HealthPending:          p.outputs != nil && p.outputs.Health != nil && p.outputs.Health.State == "pending",
		Slots:                  r.slots(ctx, p),
	}
	if p.rendered != nil {
		in.InputsHash = p.rendered.Hash
	}
	changeOp, hash := captfv1.OperationApply, in.InputsHash
	if in.Deleting {
		changeOp, hash = captfv1.OperationDestroy, ""
	}
	in.LastChange, in.Failures = lastRun(p.jobList, changeOp, hash)
	lastApplied := lastSuccess(p.jobList, captfv1.OperationApply, "")
	in.LastRefresh = latest(lastApplied, lastSuccess(p.jobList, captfv1.OperationRefresh, ""))
	in.PendingRefreshes = countSince(p.jobList, captfv1.OperationRefresh, lastApplied)
	r.driftInputs(p, &in, lastApplied)
	if p.owner.Kind == contract.KindMachinePool {
		in.MembershipInterval = defaultMembershipInterval
		if s := membershipSeconds(p); s > 0 {
			in.MembershipInterval = time.Duration(s) * time.Second
		}
	}
	in.Restore = r.restoreRequest(p)
	syncHold(p.scope.Object, p.jobList)
	in.NotPersisted, _ = notPersisted(p.jobList, p.scope.Object.GetAnnotations())
	if in.InputsHash != "" {
		plan, err := r.currentPlan(ctx, p, in.InputsHash)
		if err != nil {
			return err
		}
		in.Plan = plan
	}
	p.decision = decide.Next(in)
	p.requeueAfter(p.decision.RequeueAfter)
	ctrl.LoggerFrom(ctx).V(4).Info("Decided", "op", p.decision.Op, "reason", p.decision.Reason, "wait", p.decision.Wait)
	return nil
}

// membershipSeconds is a pool's membership refresh interval (0: the default).
func membershipSeconds[T capi.Object](p *pass[T]) int32 {
	if mp, ok := any(p.scope.Object).(*captfv1.TerraformMachinePool); ok {
		return ptr.Deref(mp.Spec.MembershipRefreshIntervalSeconds, 0)
	}
	return 0
}

// stateView is the decision's view of the state: present, unreadable (why) and what it holds.
func stateView[T capi.Object](p *pass[T]) decide.State {
	if p.snap != nil {
		v := decide.State{Present: true, InputsHash: p.snap.InputsHash, Resources: p.snap.Resources}
		if p.lockForeign {
			v.Unreadable = captfv1.StateLockedReason
		}
		return v
	}
	reason := reasonOf(p.stateErr)
	if reason == "" || reason == captfv1.StateNotFoundReason {
		return decide.State{}
	}
	return decide.State{Present: true, Unreadable: reason}
}

// driftInputs fills in the drift policy and what the newest drift check found. An apply leaves
// no drift behind, so it counts as a check.
func (r *provider[T]) driftInputs(p *pass[T], in *decide.Input, lastApplied time.Time) {
	policy := p.spec.Drift
	if policy == nil && p.tfCluster != nil && p.tfCluster.Spec.Defaults != nil {
		policy = p.tfCluster.Spec.Defaults.Drift
	}
	in.DriftInterval, in.DriftAction = r.opts.DriftInterval, captfv1.DriftActionReport
	if policy != nil {
		if policy.IntervalSeconds != nil {
			in.DriftInterval = time.Duration(*policy.IntervalSeconds) * time.Second
		}
		if policy.Action != "" {
			in.DriftAction = policy.Action
		}
	}
	// The next check is due an interval after the newest one, failed or not; what was found
	// comes from the newest check that succeeded (a failed one found nothing either way).
	in.LastDriftCheck = lastApplied
	if drift := newestBookkept(p.jobList, captfv1.OperationDrift, ""); drift != nil && jobs.FinishedAt(drift).After(lastApplied) {
		in.LastDriftCheck = jobs.FinishedAt(drift)
	}
	if drift := newestBookkept(p.jobList, captfv1.OperationDrift, captfv1.RunSucceeded); drift != nil && jobs.FinishedAt(drift).After(lastApplied) {
		n, _ := strconv.Atoi(drift.Annotations[driftAnnotation])
		in.DriftFound = n > 0
		in.DriftRemediations = in.Failures
	}
}

// restoreRequest reads captf.io/restore-state and finds the backup it names.
func (r *provider[T]) restoreRequest(p *pass[T]) *decide.Restore {
	v, ok := p.scope.Object.GetAnnotations()[captfv1.RestoreStateAnnotation]
	if !ok {
		return nil
	}
	serial, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return &decide.Restore{Serial: -1}
	}
	req := &decide.Restore{Serial: serial, Done: ptr.Deref(p.status.LastRestoredSerial, -1) == serial}
	for i := range p.jobList {
		if answersRestore(&p.jobList[i], v) && p.jobList[i].Annotations[captfv1.BookkeptAnnotation] != "" {
			req.Done = true // restored or failed: a failed restore is never retried for the same serial
		}
	}
	req.BackupFound = r.backupOf(p, serial) != nil
	return req
}

func (r *provider[T]) backupOf(p *pass[T], serial int64) *state.BackupSet {
	for i := range p.backups {
		if b := &p.backups[i]; b.Complete && b.Serial == serial {
			return b
		}
	}
	return nil
}

// lastRun returns an operation's newest recorded run (of the given inputs hash, if any) and how
// many of its newest runs failed in a row. Interruptions are not the module's failures and are
// skipped; a blocked or plan-changed apply ends the count.
func lastRun(list []batchv1.Job, op captfv1.Operation, hash string) (*decide.Run, int) {
	var last *decide.Run
	failures := 0
	for i := range list { // newest first
		j := &list[i]
		res := captfv1.RunResult(j.Annotations[captfv1.BookkeptAnnotation])
		if res == "" || j.Labels[captfv1.OperationLabel] != string(op) ||
			(hash != "" && j.Annotations[captfv1.InputsHashAnnotation] != hash) {
			continue
		}
		if last == nil {
			last = &decide.Run{Result: res, FinishedAt: jobs.FinishedAt(j)}
		}
		if res == captfv1.RunInterrupted {
			continue
		}
		if res != captfv1.RunFailed {
			break
		}
		failures++
	}
	return last, failures
}

// newestBookkept is an operation's newest recorded Job with the result (any result for "").
func newestBookkept(list []batchv1.Job, op captfv1.Operation, result captfv1.RunResult) *batchv1.Job {
	for i := range list {
		res := list[i].Annotations[captfv1.BookkeptAnnotation]
		if list[i].Labels[captfv1.OperationLabel] == string(op) && res != "" && (result == "" || res == string(result)) {
			return &list[i]
		}
	}
	return nil
}

func lastSuccess(list []batchv1.Job, op captfv1.Operation, hash string) time.Time {
	for i := range list {
		j := &list[i]
		if j.Labels[captfv1.OperationLabel] == string(op) &&
			j.Annotations[captfv1.BookkeptAnnotation] == string(captfv1.RunSucceeded) &&
			(hash == "" || j.Annotations[captfv1.InputsHashAnnotation] == hash) {
			return jobs.FinishedAt(j)
		}
	}
	return time.Time{}
}

func countSince(list []batchv1.Job, op captfv1.Operation, since time.Time) int {
	n := 0
	for i := range list {
		if list[i].Labels[captfv1.OperationLabel] == string(op) && jobs.FinishedAt(&list[i]).After(since) {
			n++
		}
	}
	return n
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// nextAttempt numbers a new run of an operation for an inputs hash: one past the highest run
// number among its Jobs still listed. A pass that crashed after creating a Job it cannot see yet
// computes the same number, so the same name, and finds it instead of starting a second one.
func nextAttempt(list []batchv1.Job, op captfv1.Operation, hash string) int {
	n := 0
	for i := range list {
		j := &list[i]
		if j.Labels[captfv1.OperationLabel] != string(op) || j.Annotations[captfv1.InputsHashAnnotation] != hash {
			continue
		}
		if a, err := strconv.Atoi(j.Labels[captfv1.AttemptLabel]); err == nil && a > n {
			n = a
		}
	}
	return n + 1
}
