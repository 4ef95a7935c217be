// Package decide holds the one pure function that chooses what a CAPTF object does next. A
// reconcile observes everything (the object, its state, its Jobs, plans, dependents, caps,
// and, once an operation is due, what starting its Job needs), calls Next, and acts on the
// answer; no other code decides whether to plan, apply, destroy, refresh, check drift or
// restore, nor whether a Job may start now. That keeps every safety rule of CAPTF readable in
// one place, in the order it applies, and table-testable without an API server.
package decide

import (
	"hash/fnv"
	"time"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// Input is everything one reconcile observed that bears on the next operation.
type Input struct {
	// Now is the reconcile's clock.
	Now time.Time
	// UID of the object; spreads scheduled work with a deterministic jitter and gives each
	// object its own phase of the drift interval.
	UID string
	// Created is the object's creation time: an object without a recorded drift check or
	// apply schedules its first check from it.
	Created time.Time
	// Mutable is true for clusters and pools (a changed input re-applies) and false for machines
	// (applied once, never again).
	Mutable bool

	// Deleting is true once the object has a deletion timestamp. A paused object never reaches
	// Next: the shared plumbing stops it before.
	Deleting bool
	// DeletionPolicy of the object.
	DeletionPolicy captfv1.DeletionPolicy
	// DependentsExist is true while a deleting cluster still has machines or pools.
	DependentsExist bool
	// Terminating is set while the object's namespace is being deleted: Kubernetes then creates
	// nothing in it (no Job, run Secret or Lease), so a destroy can only run elsewhere.
	Terminating *Terminating

	// ActiveJob is true while one of the object's Jobs runs. Nothing else is observed then: the
	// state may be written under the Job's feet.
	ActiveJob bool

	// State is what the backend's Secrets held.
	State State
	// EverApplied is true when anything proves an apply once succeeded: the provisioned status,
	// the captf.io/applied marker on the durable inputs Secret, or a state backup. It is what
	// tells a lost state from one that never existed.
	EverApplied bool

	// InputsHash is the hash of the inputs rendered now; empty while they cannot be rendered.
	InputsHash string
	// Image is the module image the object asks for (spec.source.image); empty while the inputs
	// cannot be rendered.
	Image string
	// InputsWait is the reason inputs cannot be rendered (a DependenciesReady reason).
	InputsWait string
	// DurableInputs is true when the durable inputs Secret of the last apply exists; a destroy
	// renders from it.
	DurableInputs bool

	// ApplyPolicy of the object.
	ApplyPolicy captfv1.ApplyPolicy
	// LastChange is the newest finished apply or plan of the current inputs (while deleting: the
	// newest destroy), if any: under Manual a change is planned first, and a failed plan backs
	// off like a failed apply.
	LastChange *Run
	// Failures counts consecutive failures of that operation.
	Failures int
	// FailedJobsHistoryLimit from the jobs policy: past this many consecutive failures, retries
	// wait the longest backoff.
	FailedJobsHistoryLimit int
	// Plan is the newest TerraformPlan for the current inputs, if any.
	Plan *Plan
	// ApprovalsUnenforced says why approvals are not honoured now (the admission policies they
	// rest on are missing or changed); "" when they are.
	ApprovalsUnenforced string

	// Restore is a requested restore (captf.io/restore-state), if any.
	Restore *Restore

	// NotPersisted is the reason (StateTooLarge or StateNotPersisted) when the newest run that
	// writes state could not save it and no operator said since that it was recovered
	// (captf.io/state-recovered); empty otherwise.
	NotPersisted string

	// Drift policy and history.
	DriftInterval time.Duration
	DriftAction   captfv1.DriftAction
	// LastDriftCheck is when the newest drift check or apply finished (an apply leaves no
	// drift behind); zero: never.
	LastDriftCheck time.Time
	// DriftFound is true when the newest drift check found changes.
	DriftFound bool
	// DriftRemediations counts failed remediation applies since the last clean drift check.
	DriftRemediations int

	// HealthPending is true while the module reports health state pending.
	HealthPending bool
	// PendingRefreshes counts refreshes run while health was pending.
	PendingRefreshes int
	// LastRefresh is when outputs were last read fresh: the newest refresh or apply.
	LastRefresh time.Time
	// MembershipInterval, when set (pools), refreshes the pool's instances this often.
	MembershipInterval time.Duration

	// Slots report the active-Job caps.
	Slots Slots

	// CredentialsMissing is true when the credentials Secret a Job would read does not exist:
	// its Pod could not start and would only wait out its deadline.
	CredentialsMissing bool
	// Start is what starting the due operation's Job needs, observed only once Next returned
	// CheckStart: reading the Job's ServiceAccount, the requested backup and the leases live
	// costs calls an object with nothing to do should not make.
	Start Start
}

// Refusal is a Job the API server refused to create.
type Refusal struct {
	// Reason is the condition reason (QuotaExceeded).
	Reason string
	// At is when it was refused.
	At time.Time
}

// Start is what a Job's start needs beyond the decision to run it.
type Start struct {
	// Checked is true once the fields below were observed in this reconcile.
	Checked bool
	// PolicyInvalid is true when the effective Job policy cannot make a Job.
	PolicyInvalid bool
	// ServiceAccountInvalid is true when the Job's ServiceAccount does not exist or may not run
	// CAPTF Jobs.
	ServiceAccountInvalid bool
	// BackupInvalid is true when the backup a restore would push fails its checks (digest,
	// lineage, completeness).
	BackupInvalid bool
	// LastRefusal is the API server's newest refusal of one of the object's Jobs (a
	// ResourceQuota at admission), if any.
	LastRefusal *Refusal
	// Leases are the Job leases as read just now, without taking them.
	Leases Leases
}

// Leases are the coordination leases a Job needs, read without taking them. act takes them;
// a race lost there is that reconcile's error and the next one's observation.
type Leases struct {
	// Gate is true under the cluster operation gate (--cluster-operation-gate) when the object
	// belongs to a Cluster.
	Gate bool
	// Cluster is true for a TerraformCluster: its mutating operations wait for its members'.
	Cluster bool
	// RunHeld is true when the object's run lease is held by a live Job of its own that the
	// Job list does not show yet.
	RunHeld bool
	// ClusterHeld (machines and pools) is true while the cluster's operation lease is held.
	ClusterHeld bool
	// MembersBusy (clusters) is true while mutating Jobs of the cluster's machines or pools
	// hold their run leases.
	MembersBusy bool
}

// State summarises the backend's state Secrets.
type State struct {
	// Present is true when a state Secret exists.
	Present bool
	// Unreadable is the StateReadable reason when it exists but cannot be used (encrypted,
	// corrupt, inconsistent, locked by a foreign holder); empty when readable.
	Unreadable string
	// InputsHash recorded on the state by the last successful apply or restore.
	InputsHash string
	// Image is the module image of the newest successful apply, "" when the state records none.
	Image string
	// Resources counts managed resources.
	Resources int
}

// Run is a finished Job.
type Run struct {
	Result     captfv1.RunResult
	FinishedAt time.Time
}

// Plan is a TerraformPlan of the current inputs.
type Plan struct {
	Name     string
	PlanHash string
	Reason   captfv1.PlanReason
	Approved bool
	// Terminal is true once the plan was applied, superseded or failed.
	Terminal bool
}

// Restore is a requested restore.
type Restore struct {
	Serial int64
	// BackupFound is true when a complete backup of the serial exists.
	BackupFound bool
	// Done is true once this serial was restored (or its restore failed: a failed restore is
	// never retried for the same serial).
	Done bool
}

// Slots are the caps on active Jobs.
type Slots struct {
	// Full is true when the manager-wide, the namespace's or the cluster's cap is reached.
	Full bool
	// Reached names the cap that is full, for the condition message.
	Reached string
	// Busy is true above 80% of a cap, where background work (refresh, drift) waits.
	Busy bool
	// DriftFull is true when the manager-wide budget of running drift Jobs
	// (--max-concurrent-drift-jobs) is used up: a due drift check waits; nothing else does.
	DriftFull bool
	// Uncounted is true when the active Jobs could not be counted: the caps then count as
	// reached (they fail closed).
	Uncounted bool
}

func (s Slots) full() bool { return s.Full || s.Uncounted }

// Decision is what to do next.
type Decision struct {
	// Op to start now; empty when nothing starts.
	Op captfv1.Operation
	// Why the operation runs, or what the object waits for: a condition reason from
	// api/captf/v1alpha1 or one of the scheduling reasons below.
	Reason string
	// Wait is true when something must happen before the object can proceed.
	Wait bool
	// RequeueAfter is when to look again (zero: only on an event).
	RequeueAfter time.Duration
	// ExpectPlan is the approved plan hash an apply must reproduce before it applies.
	ExpectPlan string
	// PlanName names the approved TerraformPlan an apply consumes.
	PlanName string
	// Finalize lets the finalizer go: there is nothing to destroy.
	Finalize bool
	// Retain keeps the infrastructure and its state and lets the finalizer go.
	Retain bool
	// CheckStart asks for what the start of Op needs (Input.Start) and for Next again: Op
	// does not start on this decision.
	CheckStart bool
	// Pending is the operation that is due but waits for its Job's start (Reason says why).
	Pending captfv1.Operation
	// ClaimLeases asks act to take the leases of Pending without starting its Job: a cluster's
	// mutating operation waiting for its members holds the cluster lease, so members that
	// would start later wait for it (writers are preferred).
	ClaimLeases bool
	// Relocate asks act to hand the destroy to a copy of the object in the destroy namespace
	// (Terminating): create the copy, copy the state, durable inputs and what its Jobs read to
	// it, and delete it there.
	Relocate bool
}

// Terminating is what a deleting object in a terminating namespace knows of its destroy
// elsewhere: a copy of the object in the destroy namespace (--destroy-namespace), deleted there
// with copies of its state and inputs, destroys the infrastructure.
type Terminating struct {
	// Elsewhere is true when a destroy namespace is configured.
	Elsewhere bool
	// Copy is how far the copy has got.
	Copy CopyPhase
}

// CopyPhase is the progress of the copy that destroys elsewhere.
type CopyPhase int

const (
	// CopyNone: no copy exists and none was handed the destroy yet.
	CopyNone CopyPhase = iota
	// CopyPending: the copy exists but is not handed over yet (its Secrets, its deletion).
	CopyPending
	// CopyDestroying: the copy is deleted and destroys.
	CopyDestroying
	// CopyDone: the copy is gone and left no state behind: the destroy finished.
	CopyDone
	// CopyLeftState: the copy is gone but its state still records resources (its finalizer
	// was removed by hand, or it was set to Retain).
	CopyLeftState
)

// Starts reports whether act starts Op's Job on this decision.
func (d Decision) Starts() bool { return d.Op != "" && !d.CheckStart && !d.Wait }

// Scheduling reasons (a condition reason is used wherever one exists).
const (
	ReasonNoState            = "NoState"
	ReasonStateWithoutHash   = "StateWithoutInputsHash"
	ReasonInputsChanged      = "InputsChanged"
	ReasonImageChanged       = "ModuleImageChanged"
	ReasonRetry              = "RetryAfterFailure"
	ReasonDriftRemediation   = "DriftRemediation"
	ReasonApproved           = "PlanApproved"
	ReasonRestoreRequested   = "RestoreRequested"
	ReasonDestroy            = "Destroy"
	ReasonNothingToDestroy   = "NothingToDestroy"
	ReasonDestroyedElsewhere = "DestroyedElsewhere"
	// The namespace is being deleted: a copy of the object destroys in the destroy namespace
	// (nsdelete.go), or, without one or after a copy that went without destroying, the
	// deletion holds. The Deleting condition's message says which.
	ReasonDestroyingElsewhere  = "DestroyingElsewhere"
	ReasonNamespaceTerminating = "NamespaceTerminating"
	ReasonRetain               = "Retain"
	ReasonJobRunning           = "JobRunning"
	ReasonDriftDue             = "DriftCheckDue"
	// ReasonBackgroundDeferred: a due drift check or refresh waits for the drift budget or
	// for room under the caps. It is background work: the object's status stays as it was
	// (nothing it reports changed), and it looks again soon.
	ReasonBackgroundDeferred = "BackgroundDeferred"
	ReasonHealthPending      = "HealthPending"
	ReasonMembershipRefresh  = "MembershipRefresh"
	ReasonUpToDate           = "UpToDate"
	ReasonPaused             = "Paused"
	ReasonStateLost          = captfv1.StateLostReason
	ReasonDurableInputsGone  = captfv1.DurableInputsMissingReason
)

// Timings.
const (
	activeJobRecheck = time.Minute
	minBackoff       = time.Minute
	maxBackoff       = 10 * time.Minute
	blockedRecheck   = 10 * time.Minute
	slotRecheck      = 15 * time.Second
	// deferSpread spreads the rechecks of deferred background work over slotRecheck to
	// slotRecheck+deferSpread, so a fleet that is due at once (a manager down for part of an
	// interval) does not come back in one wave every 15 s.
	deferSpread  = 45 * time.Second
	leaseRecheck = 30 * time.Second
	startRecheck = time.Minute // nothing watches ServiceAccounts, credentials or quotas
	heldRecheck  = time.Minute
	// policyRecheck: how soon an approved plan waiting for its admission policies looks again.
	policyRecheck     = 30 * time.Second
	pendingFirst      = 30 * time.Second
	pendingCap        = 5 * time.Minute
	defaultRemedyCap  = 3
	maxJitterFraction = 10 // percent
)

// Next returns what the object does next. The order of the rules is the order of precedence.
func Next(in Input) Decision {
	// A running Job owns the object: nothing else is decided, and the state is not trusted
	// while it may be written. The Job watch usually brings the object back first.
	if in.ActiveJob {
		return Decision{Reason: ReasonJobRunning, Wait: true, RequeueAfter: activeJobRecheck}
	}
	d := due(in)
	if d.Op == "" {
		return d
	}
	return start(in, d)
}

// Paused is the decision for a paused object: nothing starts and nothing is destroyed
// (clusterctl move copies and deletes paused objects), but a running Job's end is still
// recorded (RecordedWhilePaused), so the object looks again while one runs.
func Paused(in Input) Decision {
	if in.ActiveJob {
		return Decision{Reason: ReasonJobRunning, Wait: true, RequeueAfter: activeJobRecheck}
	}
	return Decision{Reason: ReasonPaused, Wait: true}
}

// RecordedWhilePaused says whether a Job of op that ended with res is recorded while its object
// is paused. While paused, the manager changes the object's status and the objects that exist,
// and creates and deletes nothing in its namespace: clusterctl move lists what it moves before
// it pauses the Cluster, so an object created afterwards stays behind and one deleted fails the
// copy. Recording a plan creates its TerraformPlan and plan view, so such a Job waits,
// unrecorded, until the object is unpaused (after a move, the target plans again); every other
// result is recorded at once, and block-move clears once no Job runs. The run's leases and the
// Job history are also left until then (a lease whose Job is gone frees itself, leases.Free).
func RecordedWhilePaused(op captfv1.Operation, res captfv1.RunResult) bool {
	plans := (op == captfv1.OperationPlan && res == captfv1.RunSucceeded) ||
		(op == captfv1.OperationApply && (res == captfv1.RunBlocked || res == captfv1.RunPlanChanged))
	return !plans
}

// start applies what a due operation's Job needs, in the order a start meets it. A wait keeps
// the operation as Pending.
func start(in Input, d Decision) Decision {
	if !in.Start.Checked {
		d.CheckStart = true
		return d
	}
	wait := func(reason string, after time.Duration) Decision {
		return Decision{Reason: reason, Wait: true, RequeueAfter: after, Pending: d.Op}
	}
	s := in.Start
	switch {
	case s.PolicyInvalid:
		return wait(captfv1.JobPolicyInvalidReason, 0) // fixing the spec brings the object back
	case s.ServiceAccountInvalid:
		return wait(captfv1.JobPolicyInvalidReason, startRecheck)
	case in.CredentialsMissing:
		// Even a destroy, which runs with the durable inputs, needs the credentials.
		return wait(captfv1.CredentialsNotFoundReason, startRecheck)
	case d.Op == captfv1.OperationRestore && s.BackupInvalid:
		// Never retried on its own: the operator names another serial or removes the request.
		return wait(captfv1.RestoreBackupInvalidReason, 0)
	}
	if r := s.LastRefusal; r != nil {
		// Admission refused the Job a moment ago; asking again at once would only be refused
		// again (and rewrite the object on every try).
		if left := r.At.Add(startRecheck).Sub(in.Now); left > 0 {
			return wait(r.Reason, left)
		}
	}
	l := s.Leases
	switch {
	case l.RunHeld:
		return wait(captfv1.WaitingForRunLeaseReason, leaseRecheck)
	case l.Gate && !l.Cluster && l.ClusterHeld:
		return wait(captfv1.WaitingForClusterOperationReason, leaseRecheck)
	case l.Gate && l.Cluster && mutating(d.Op) && l.MembersBusy:
		w := wait(captfv1.WaitingForMachineOperationsReason, leaseRecheck)
		w.ClaimLeases = true
		return w
	}
	return d
}

// mutating operations change infrastructure or state: only they take part in the cluster
// operation gate.
func mutating(op captfv1.Operation) bool {
	return op == captfv1.OperationApply || op == captfv1.OperationDestroy || op == captfv1.OperationRestore
}

// due is the operation the object needs next, or what it waits for, before its Job's start is
// considered.
func due(in Input) Decision {
	if in.Deleting {
		return nextDeleting(in)
	}
	if d, ok := restore(in); ok {
		return d
	}
	if in.NotPersisted != "" {
		// What the last run created is recorded only in the state it could not save: another
		// run would create it again, and lose it again.
		return Decision{Reason: in.NotPersisted, Wait: true, RequeueAfter: heldRecheck}
	}
	if in.State.Unreadable != "" {
		// Never run anything against a state we cannot read: an apply could duplicate or
		// destroy what it cannot see.
		return Decision{Reason: in.State.Unreadable, Wait: true, RequeueAfter: heldRecheck}
	}
	if !in.State.Present && in.EverApplied {
		// The state is gone but the infrastructure may not be: re-applying would build a second
		// set. Restore a backup (captf.io/restore-state) or delete the object with Retain.
		return Decision{Reason: ReasonStateLost, Wait: true, RequeueAfter: heldRecheck}
	}
	if in.InputsHash == "" {
		return Decision{Reason: in.InputsWait, Wait: true}
	}
	if reason, due := applyDue(in); due {
		return gate(in, reason)
	}
	return schedule(in)
}

// nextDeleting applies the deletion rules: dependents first, Retain, a held state, then destroy.
func nextDeleting(in Input) Decision {
	if in.DependentsExist {
		return Decision{Reason: captfv1.DependentsExistReason, Wait: true, RequeueAfter: heldRecheck}
	}
	if in.DeletionPolicy == captfv1.DeletionPolicyRetain {
		return Decision{Reason: ReasonRetain, Retain: true}
	}
	if in.Restore != nil && !in.Restore.Done && (!in.State.Present || in.State.Unreadable != "") {
		// A deletion held on a missing or unreadable state may restore a backup first.
		if d, ok := restore(in); ok {
			return d
		}
	}
	switch {
	case in.NotPersisted != "":
		// A destroy would not see what the unsaved state records, and the finalizer would go.
		return Decision{Reason: in.NotPersisted, Wait: true, RequeueAfter: heldRecheck}
	case in.State.Unreadable != "":
		return Decision{Reason: in.State.Unreadable, Wait: true, RequeueAfter: heldRecheck}
	case in.Terminating != nil && in.State.Present && in.State.Resources > 0:
		return elsewhere(*in.Terminating)
	case !in.State.Present && in.EverApplied:
		return Decision{Reason: ReasonStateLost, Wait: true, RequeueAfter: heldRecheck}
	case !in.State.Present, in.State.Resources == 0:
		return Decision{Reason: ReasonNothingToDestroy, Finalize: true}
	case !in.DurableInputs && !in.Mutable:
		// A machine's destroy must use the inputs it was applied with; without them it cannot
		// run. Mutable kinds fall back to their current inputs.
		return Decision{Reason: ReasonDurableInputsGone, Wait: true, RequeueAfter: heldRecheck}
	case !in.DurableInputs && in.InputsHash == "":
		return Decision{Reason: in.InputsWait, Wait: true, RequeueAfter: heldRecheck}
	}
	if in.LastChange != nil && in.LastChange.Result == captfv1.RunFailed {
		if wait, ok := backoff(in); ok {
			return Decision{Reason: captfv1.DestroyFailedReason, Wait: true, RequeueAfter: wait}
		}
	}
	if in.Slots.full() {
		return Decision{Reason: captfv1.WaitingForJobSlotReason, Wait: true, RequeueAfter: slotRecheck}
	}
	return Decision{Op: captfv1.OperationDestroy, Reason: ReasonDestroy}
}

// elsewhere decides the destroy of an object whose namespace is being deleted: nothing can run
// in that namespace, so a copy of the object destroys in the destroy namespace; the object lets
// its finalizer go once the copy left nothing behind. Without a destroy namespace, or when the
// copy went without destroying, the deletion holds (and the namespace with it).
func elsewhere(t Terminating) Decision {
	switch {
	case !t.Elsewhere:
		return Decision{Reason: ReasonNamespaceTerminating, Wait: true, RequeueAfter: heldRecheck}
	case t.Copy == CopyNone, t.Copy == CopyPending:
		return Decision{Reason: ReasonDestroyingElsewhere, Relocate: true}
	case t.Copy == CopyDestroying:
		return Decision{Reason: ReasonDestroyingElsewhere, Wait: true, RequeueAfter: heldRecheck}
	case t.Copy == CopyDone:
		return Decision{Reason: ReasonDestroyedElsewhere, Finalize: true}
	}
	return Decision{Reason: ReasonNamespaceTerminating, Wait: true, RequeueAfter: heldRecheck}
}

// restore starts a requested restore of an existing backup, once per serial.
func restore(in Input) (Decision, bool) {
	r := in.Restore
	if r == nil || r.Done {
		return Decision{}, false
	}
	if !r.BackupFound {
		return Decision{Reason: captfv1.RestoreBackupNotFoundReason, Wait: true}, true
	}
	if in.InputsHash == "" {
		// The restore Job runs with the current inputs (its backend and credentials).
		return Decision{Reason: in.InputsWait, Wait: true}, true
	}
	if in.Slots.full() {
		return Decision{Reason: captfv1.WaitingForJobSlotReason, Wait: true, RequeueAfter: slotRecheck}, true
	}
	return Decision{Op: captfv1.OperationRestore, Reason: ReasonRestoreRequested}, true
}

// applyDue says whether the current inputs need an apply, and why.
func applyDue(in Input) (string, bool) {
	switch {
	case !in.State.Present:
		return ReasonNoState, true
	case in.State.InputsHash == "":
		// An apply never finished (or was never adopted): finish it.
		return ReasonStateWithoutHash, true
	case in.Mutable && in.State.InputsHash != in.InputsHash:
		return ReasonInputsChanged, true
	case in.Mutable && in.State.Image != "" && in.Image != "" && in.State.Image != in.Image:
		// A new module version (spec.source.image) rolls out like a change of inputs: planned,
		// guarded, approved when it deletes or replaces anything.
		return ReasonImageChanged, true
	case in.Mutable && in.DriftFound && in.DriftAction == captfv1.DriftActionRemediate &&
		in.DriftRemediations < remedyCap(in):
		return ReasonDriftRemediation, true
	}
	return "", false
}

func remedyCap(in Input) int {
	if in.FailedJobsHistoryLimit > 0 {
		return in.FailedJobsHistoryLimit
	}
	return defaultRemedyCap
}

// gate applies the guards between "an apply is due" and starting one: retry backoff, the
// destructive-plan guard, Manual approval and the Job caps.
func gate(in Input, reason string) Decision {
	// Under Manual every apply is planned and approved first, except the very first one.
	manual := in.ApplyPolicy == captfv1.ApplyPolicyManual && reason != ReasonNoState
	last := in.LastChange
	if last != nil && last.Result == captfv1.RunFailed {
		if wait, ok := backoff(in); ok {
			return Decision{Reason: captfv1.ApplyFailedReason, Wait: true, RequeueAfter: wait}
		}
		if reason != ReasonDriftRemediation {
			reason = ReasonRetry
		}
	}

	approved := in.Plan != nil && in.Plan.Approved && !in.Plan.Terminal
	pending := in.Plan != nil && !in.Plan.Approved && !in.Plan.Terminal
	blocked := last != nil && last.Result == captfv1.RunBlocked

	switch {
	case approved && in.Plan.Name != "" && in.ApprovalsUnenforced != "":
		// An approval is trusted only while the API server checks who approves and what only
		// the manager writes: it fails closed.
		return Decision{Reason: captfv1.ApprovalsNotEnforcedReason, Wait: true, RequeueAfter: policyRecheck}
	case approved:
		if in.Slots.full() {
			return Decision{Reason: captfv1.WaitingForJobSlotReason, Wait: true, RequeueAfter: slotRecheck}
		}
		return Decision{Op: captfv1.OperationApply, Reason: ReasonApproved,
			ExpectPlan: in.Plan.PlanHash, PlanName: in.Plan.Name}
	case pending && manual:
		return Decision{Reason: captfv1.PlanAwaitingApprovalReason, Wait: true}
	case pending || blocked:
		// The destructive guard stopped this input's apply; only an approval (or new inputs,
		// which change the hash and so this Input) moves it on.
		return Decision{Reason: captfv1.DestructivePlanBlockedReason, Wait: true, RequeueAfter: blockedRecheck}
	case last != nil && last.Result == captfv1.RunPlanChanged && !manual:
		// The approved plan no longer matched; its replacement waits as a new plan.
		return Decision{Reason: captfv1.PlanChangedReason, Wait: true, RequeueAfter: blockedRecheck}
	}
	if in.Slots.full() {
		return Decision{Reason: captfv1.WaitingForJobSlotReason, Wait: true, RequeueAfter: slotRecheck}
	}
	if manual {
		return Decision{Op: captfv1.OperationPlan, Reason: reason}
	}
	return Decision{Op: captfv1.OperationApply, Reason: reason}
}

// backoff returns how long a failed operation still waits before its retry (ok=false: retry
// now). 1 minute doubling to 10; from FailedJobsHistoryLimit consecutive failures on, 10.
func backoff(in Input) (time.Duration, bool) {
	n := max(in.Failures, 1)
	wait := maxBackoff
	if limit := in.FailedJobsHistoryLimit; limit <= 0 || n < limit {
		wait = min(minBackoff<<min(n-1, 10), maxBackoff)
	}
	left := in.LastChange.FinishedAt.Add(wait).Sub(in.Now)
	return left, left > 0
}

// schedule picks background work (drift checks and refreshes) or the next time to look again.
func schedule(in Input) Decision {
	type due struct {
		op     captfv1.Operation
		reason string
		at     time.Time
	}
	var next []due
	if in.HealthPending {
		wait := min(pendingFirst<<min(in.PendingRefreshes, 10), pendingCap)
		next = append(next, due{captfv1.OperationRefresh, ReasonHealthPending, in.LastRefresh.Add(wait)})
	}
	if in.MembershipInterval > 0 {
		next = append(next, due{captfv1.OperationRefresh, ReasonMembershipRefresh,
			in.LastRefresh.Add(jitter(in.UID, in.MembershipInterval))})
	}
	if in.DriftInterval > 0 {
		next = append(next, due{captfv1.OperationDrift, ReasonDriftDue,
			DriftDue(in.UID, in.DriftInterval, in.LastDriftCheck, in.Created)})
	}
	if len(next) == 0 {
		return Decision{Reason: ReasonUpToDate}
	}
	soonest := next[0]
	for _, d := range next[1:] {
		if d.at.Before(soonest.at) {
			soonest = d
		}
	}
	if wait := soonest.at.Sub(in.Now); wait > 0 {
		return Decision{Reason: ReasonUpToDate, RequeueAfter: wait}
	}
	if in.Slots.Uncounted {
		// Fails closed, visibly: the count's error is what the operator has to fix.
		return Decision{Reason: captfv1.WaitingForJobSlotReason, Wait: true, RequeueAfter: slotRecheck}
	}
	// Background work yields: to applies and destroys near a cap (80 %), and a drift check to
	// the manager-wide drift budget. It reports no wait: nothing the object shows changed.
	if in.Slots.Busy || (soonest.op == captfv1.OperationDrift && in.Slots.DriftFull) {
		return Decision{Reason: ReasonBackgroundDeferred, RequeueAfter: slotRecheck + spread(in.UID, deferSpread)}
	}
	return Decision{Op: soonest.op, Reason: soonest.reason}
}

// DriftDue is when an object's next drift check is due. Every object has its own phase of the
// interval, a fixed offset from the Unix epoch derived from its UID (so a fleet's phases are
// spread evenly over the interval, whenever its objects were created and however often the
// manager restarts), and its check is due at the first time of that phase at least half an
// interval after the last check (an apply counts as one; without either, after its creation).
// Once a check ran on time, the next is due exactly one interval later; a first check or one
// after a late run comes between half an interval and one and a half after it. Zero: due now.
func DriftDue(uid string, interval time.Duration, last, created time.Time) time.Time {
	anchor := last
	if anchor.IsZero() {
		anchor = created
	}
	if anchor.IsZero() || interval <= 0 {
		return time.Time{}
	}
	from := anchor.Add(interval / 2)
	phase := spread(uid, interval)
	ahead := (phase - time.Duration(from.UnixNano()%int64(interval)) + interval) % interval
	return from.Add(ahead)
}

// jitter stretches an interval by up to 10%, the same for the same object every time, so many
// objects created together do not refresh in lockstep.
func jitter(uid string, d time.Duration) time.Duration {
	return d + spread(uid, d*maxJitterFraction/100)
}

// spread is a duration in [0, d), the same for the same object every time and evenly spread
// over objects.
func spread(uid string, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	return time.Duration(h.Sum64() % uint64(d))
}
