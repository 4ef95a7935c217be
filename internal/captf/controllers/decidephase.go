package controllers

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/captf/decide"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/leases"
	"github.com/capx-io/capx/internal/captf/savedplan"
	"github.com/capx-io/capx/internal/captf/state"
)

// decide asks decide.Next what the object does next, from what the phases before it recorded.
func (r *provider[T]) decide(ctx context.Context, p *pass[T]) error {
	p.input = r.input(p)
	r.ask(ctx, p)
	return nil
}

// ask asks decide.Next with p.input: once per pass, and again when checkStart or act observed
// more for the start of the operation it returned.
func (r *provider[T]) ask(ctx context.Context, p *pass[T]) {
	p.decision = decide.Next(p.input)
	p.requeueAfter(p.decision.RequeueAfter)
	d := p.decision
	ctrl.LoggerFrom(ctx).V(4).Info("Decided", "op", d.Op, "reason", d.Reason, "wait", d.Wait, "checkStart", d.CheckStart, "pending", d.Pending)
}

// decidePaused asks decide.Paused: a paused object starts nothing, and looks again while a Job
// runs.
func (r *provider[T]) decidePaused(_ context.Context, p *pass[T]) error {
	p.input = decide.Input{Now: r.clock.Now(), UID: string(p.owner.UID), ActiveJob: p.active != nil}
	p.decision = decide.Paused(p.input)
	p.requeueAfter(p.decision.RequeueAfter)
	return nil
}

// input is what the pass observed, as decide.Input. It makes no API calls.
func (r *provider[T]) input(p *pass[T]) decide.Input {
	in := decide.Input{
		Now:                    r.clock.Now(),
		UID:                    string(p.owner.UID),
		Mutable:                r.kind.mutable(),
		Deleting:               !p.scope.Object.GetDeletionTimestamp().IsZero(),
		DeletionPolicy:         p.spec.DeletionPolicy,
		DependentsExist:        len(p.dependents) > 0,
		Terminating:            p.terminating,
		ActiveJob:              p.active != nil,
		State:                  stateView(p),
		EverApplied:            ptr.Deref(p.init.Provisioned, false) || (p.stored != nil && p.stored.Applied) || len(p.backups) > 0,
		InputsWait:             p.inputsWait,
		DurableInputs:          p.stored != nil,
		ApplyPolicy:            p.spec.ApplyPolicy,
		FailedJobsHistoryLimit: int(p.policy.FailedJobsHistoryLimit),
		HealthPending:          p.outputs != nil && p.outputs.Health != nil && p.outputs.Health.State == "pending",
		MembershipInterval:     r.kind.membershipInterval(p.scope.Object),
		Slots:                  p.slots,
		CredentialsMissing:     p.inputsWait == captfv1.CredentialsNotFoundReason,
		Plan:                   p.plan,
		ApprovalsUnenforced:    p.approvalsUnenforced,
	}
	if p.rendered != nil {
		in.InputsHash = p.rendered.Hash
		in.Image = p.spec.Source.Image
	}
	// A change of these inputs is applied, or (Manual) planned first: a failed plan backs off
	// like a failed apply, and its error is the change's.
	changeOps, hash := []captfv1.Operation{captfv1.OperationApply, captfv1.OperationPlan}, in.InputsHash
	if in.Deleting {
		changeOps, hash = []captfv1.Operation{captfv1.OperationDestroy}, ""
	}
	in.LastChange, in.Failures = lastRun(p.jobList, hash, changeOps...)
	lastApplied := lastSuccess(p.jobList, captfv1.OperationApply, "")
	in.LastRefresh = latest(lastApplied, lastSuccess(p.jobList, captfv1.OperationRefresh, ""))
	in.PendingRefreshes = countSince(p.jobList, captfv1.OperationRefresh, lastApplied)
	r.driftInputs(p, &in, lastApplied)
	in.Restore = r.restoreRequest(p)
	in.NotPersisted, _ = notPersisted(p.jobList, p.scope.Object.GetAnnotations())
	return in
}

// findPlan finds the plan the decision weighs for the current inputs.
func (r *provider[T]) findPlan(ctx context.Context, p *pass[T]) error {
	if p.rendered == nil {
		return nil
	}
	plan, err := r.currentPlan(ctx, p, p.rendered.Hash)
	p.plan = plan
	if err != nil || plan == nil || !plan.Approved || plan.Name == "" {
		return err // an empty plan's implicit approval is nobody's: no policy guards it
	}
	if p.approvalsUnenforced, err = r.approvals.unenforced(ctx); err != nil {
		return err
	}
	if p.approvalsUnenforced != "" {
		r.recorder.Eventf(p.scope.Object, corev1.EventTypeWarning, "ApprovalNotHonoured",
			"TerraformPlan %s is approved, but approvals are not honoured while the API server does not enforce the policies they rest on: %s",
			plan.Name, p.approvalsUnenforced)
	}
	return nil
}

// copyHold keeps the object's copy of a state-not-persisted hold in step with its Jobs (the
// object's patch at the end of the pass saves it), so the hold outlives the Job that met it.
func (r *provider[T]) copyHold(_ context.Context, p *pass[T]) error {
	syncHold(p.scope.Object, p.jobList)
	return nil
}

// checkStart observes, once an operation is due, what starting its Job needs: a Job policy
// that makes a Job, a ServiceAccount that may run it, a sound backup for a restore, the API
// server's newest refusal, and the leases (read here, taken by act). Then it asks Next again.
func (r *provider[T]) checkStart(ctx context.Context, p *pass[T]) error {
	d := p.decision
	if !d.CheckStart {
		return nil
	}
	s := decide.Start{Checked: true}
	if p.policyErr = p.policy.Validate(); p.policyErr != nil {
		s.PolicyInvalid = true
	}
	invalid, err := r.checkServiceAccount(ctx, p)
	if err != nil {
		return err
	}
	p.accountInvalid, s.ServiceAccountInvalid = invalid, invalid != ""
	if d.Op == captfv1.OperationRestore {
		if p.backupErr, err = r.verifyRestore(ctx, p); err != nil {
			return err
		}
		s.BackupInvalid = p.backupErr != nil
	}
	if rf := r.refusals.get(p.owner.UID); rf != nil {
		p.lastRefusal = rf
		s.LastRefusal = &decide.Refusal{Reason: rf.reason, At: rf.at}
	}
	gate := r.opts.ClusterOperationGate && p.owner.ClusterName != ""
	obs, err := r.leases.Observe(ctx, p.owner, gate)
	if err != nil {
		return err
	}
	s.Leases = decide.Leases{Gate: gate, Cluster: p.owner.Kind == captfv1.KindCluster,
		RunHeld: obs.Run != nil, ClusterHeld: obs.Cluster != nil, MembersBusy: obs.Members != nil}
	p.input.Start = s
	r.ask(ctx, p)
	for _, w := range []*leases.Wait{obs.Run, obs.Cluster, obs.Members} {
		if w != nil && w.Reason == p.decision.Reason {
			p.leaseWait = w
		}
	}
	return nil
}

// verifyRestore checks the backup a restore would push: complete, its chunks' digest the
// recorded one, its lineage the current state's. A backup that fails its checks is the
// returned observation (invalid); err is a failure to read it.
func (r *provider[T]) verifyRestore(ctx context.Context, p *pass[T]) (invalid, err error) {
	b := r.backupOf(p, p.decisionRestoreSerial())
	if b == nil {
		return nil, errors.New("no backup of the requested serial to restore") // Next waits for one first
	}
	current := ""
	if p.snap != nil {
		current = p.snap.Lineage
	}
	switch err := state.VerifyBackupWith(ctx, r.reader, p.owner.Namespace, p.owner.StateSuffix(), *b, current, r.opts.StateEncryption.master()); {
	case errors.Is(err, state.ErrBackupInvalid):
		return err, nil
	case err != nil:
		return nil, err
	}
	return nil, nil
}

// stateView is the decision's view of the state: present, unreadable (why) and what it holds.
func stateView[T capi.Object](p *pass[T]) decide.State {
	if p.snap != nil {
		v := decide.State{Present: true, InputsHash: p.snap.InputsHash, Image: p.snap.Image, Resources: p.snap.Resources}
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
	// Per-kind default: a machine is applied once and never again, so its drift can only be
	// reported (the fix is a new Machine), and a fleet has many: it is checked far less often
	// than a cluster or a pool (docs/captf/drift.md).
	in.DriftInterval, in.DriftAction = r.opts.DriftInterval, captfv1.DriftActionReport
	if !r.kind.mutable() {
		in.DriftInterval = r.opts.MachineDriftInterval
	}
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
	in.LastDriftCheck, in.Created = lastApplied, p.scope.Object.GetCreationTimestamp().Time
	if in.LastDriftCheck.IsZero() && p.status.LastDriftCheck != nil {
		in.LastDriftCheck = p.status.LastDriftCheck.Time // its Jobs were pruned
	}
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

// lastRun returns the newest recorded run of the operations (of the given inputs hash, if any)
// and how many of their newest runs failed in a row. Interruptions are not the module's
// failures and are skipped; a success, a blocked or a plan-changed apply ends the count.
func lastRun(list []batchv1.Job, hash string, ops ...captfv1.Operation) (*decide.Run, int) {
	var last *decide.Run
	failures := 0
	for i := range list { // newest first
		j := &list[i]
		res := captfv1.RunResult(j.Annotations[captfv1.BookkeptAnnotation])
		if res == "" || !slices.Contains(ops, captfv1.Operation(j.Labels[captfv1.OperationLabel])) ||
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
// number among its Jobs still listed, and past every number whose Job would name one of the
// object's TerraformPlans (planNames; a plan is named for the Job that made it). Jobs do not
// survive clusterctl move, nor their history limits, but plans do: counted from the Jobs alone,
// the numbers start again at 1 after a move, and an approved apply that plans again would store
// its plan under the moved plan's name and never record it. A pass that crashed after creating
// a Job it cannot see yet computes the same number from the same Jobs and plans (that Job has
// recorded no plan), so the same name, and finds it instead of starting a second one.
func nextAttempt(o jobs.Owner, list []batchv1.Job, planNames map[string]bool, op captfv1.Operation, hash string) int {
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
	n++
	for planNames[savedplan.PlanName(o.Name, jobs.Name(o.Kind, o.Name, string(op), n, hash))] {
		n++ // at most once per plan the object has
	}
	return n
}

// recordApproval moves the plan findPlan found to the Approved phase once a user approved it
// (its status and phase label, which survive as the record of the approval), with an Event.
func (r *provider[T]) recordApproval(ctx context.Context, p *pass[T]) error {
	tp := p.pendingPlan
	if tp == nil || !tp.Spec.Approved || tp.Status.Phase == captfv1.PlanApproved {
		return nil
	}
	if err := r.setPlanPhase(ctx, tp, captfv1.PlanApproved, "Approved by "+tp.Spec.ApprovedBy); err != nil {
		return err
	}
	r.recorder.Eventf(p.scope.Object, corev1.EventTypeNormal, "PlanApproved", "TerraformPlan %s was approved by %s", tp.Name, tp.Spec.ApprovedBy)
	return nil
}
