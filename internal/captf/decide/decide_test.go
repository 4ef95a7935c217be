package decide

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// This file is the engine's rulebook: one table per group of rules, each case named for the
// promise it keeps. A change to Next that breaks a promise fails the case that states it.

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// applied is a mutable object whose state matches its inputs, with its start checked and
// nothing in its way: nothing to do.
func applied() Input {
	return Input{
		Now: t0, UID: "uid-1", Mutable: true,
		DeletionPolicy: captfv1.DeletionPolicyDestroy, ApplyPolicy: captfv1.ApplyPolicyAutomatic,
		State:       State{Present: true, InputsHash: "h2:a", Resources: 3},
		EverApplied: true, InputsHash: "h2:a", DurableInputs: true,
		FailedJobsHistoryLimit: 3,
		LastDriftCheck:         t0.Add(-time.Minute), LastRefresh: t0.Add(-time.Minute),
		Start: Start{Checked: true},
	}
}

// fresh is an object never applied.
func fresh() Input {
	in := applied()
	in.State, in.EverApplied, in.DurableInputs = State{}, false, false
	in.LastDriftCheck, in.LastRefresh = time.Time{}, time.Time{}
	return in
}

func with(in Input, f func(*Input)) Input { f(&in); return in }

type rule struct {
	promise string
	in      Input
	want    Decision
}

func check(t *testing.T, next func(Input) Decision, rules []rule) {
	t.Helper()
	for _, r := range rules {
		t.Run(r.promise, func(t *testing.T) {
			if got := next(r.in); got != r.want {
				t.Errorf("got\n  %+v\nwant\n  %+v", got, r.want)
			}
		})
	}
}

var (
	applyNow   = Decision{Op: captfv1.OperationApply, Reason: ReasonInputsChanged}
	slotWait   = Decision{Reason: captfv1.WaitingForJobSlotReason, Wait: true, RequeueAfter: 15 * time.Second}
	failed     = func(ago time.Duration) *Run { return &Run{Result: captfv1.RunFailed, FinishedAt: t0.Add(-ago)} }
	changed    = func(i *Input) { i.InputsHash = "h2:b" }
	manualEdit = func(i *Input) { i.InputsHash, i.ApplyPolicy = "h2:b", captfv1.ApplyPolicyManual }
)

func TestARunningJobOwnsTheObject(t *testing.T) {
	running := Decision{Reason: ReasonJobRunning, Wait: true, RequeueAfter: time.Minute}
	check(t, Next, []rule{
		{"nothing is decided while a Job runs", with(fresh(), func(i *Input) { i.ActiveJob = true }), running},
		{"not even a deletion", with(applied(), func(i *Input) { i.ActiveJob, i.Deleting = true, true }), running},
		{"not a restore", with(applied(), func(i *Input) {
			i.ActiveJob, i.Restore = true, &Restore{Serial: 4, BackupFound: true}
		}), running},
		{"not an approved plan", with(applied(), func(i *Input) {
			i.ActiveJob, i.InputsHash, i.Plan = true, "h2:b", &Plan{Name: "p", PlanHash: "p2:x", Approved: true}
		}), running},
	})
	check(t, Paused, []rule{
		{"a paused object looks again while its Job runs", with(applied(), func(i *Input) { i.ActiveJob = true }), running},
		{"a paused object starts nothing", with(fresh(), func(*Input) {}), Decision{Reason: ReasonPaused, Wait: true}},
		{"a paused deletion destroys nothing", with(applied(), func(i *Input) { i.Deleting = true }), Decision{Reason: ReasonPaused, Wait: true}},
	})
}

func TestFirstApply(t *testing.T) {
	first := Decision{Op: captfv1.OperationApply, Reason: ReasonNoState}
	check(t, Next, []rule{
		{"an object without state applies", fresh(), first},
		{"the first apply needs no approval, even under Manual", with(fresh(), func(i *Input) { i.ApplyPolicy = captfv1.ApplyPolicyManual }), first},
		{"inputs that cannot be rendered wait for what they lack", with(fresh(), func(i *Input) {
			i.InputsHash, i.InputsWait = "", captfv1.WaitingForBootstrapDataReason
		}), Decision{Reason: captfv1.WaitingForBootstrapDataReason, Wait: true}},
		{"the first apply waits for a Job slot", with(fresh(), func(i *Input) { i.Slots.Full = true }), slotWait},
	})
}

func TestChangedInputs(t *testing.T) {
	check(t, Next, []rule{
		{"nothing changed: nothing runs", applied(), Decision{Reason: ReasonUpToDate}},
		{"changed inputs re-apply a cluster or pool", with(applied(), changed), applyNow},
		{"a machine is applied once: changed inputs never re-apply it", with(applied(), func(i *Input) {
			i.Mutable = false
			changed(i)
		}), Decision{Reason: ReasonUpToDate}},
		{"a state without an inputs hash finishes its apply", with(applied(), func(i *Input) { i.State.InputsHash = "" }),
			Decision{Op: captfv1.OperationApply, Reason: ReasonStateWithoutHash}},
		{"a machine's unfinished apply is finished too", with(applied(), func(i *Input) { i.Mutable, i.State.InputsHash = false, "" }),
			Decision{Op: captfv1.OperationApply, Reason: ReasonStateWithoutHash}},
		{"a change waits for a Job slot", with(applied(), func(i *Input) { changed(i); i.Slots.Full = true }), slotWait},
	})
}

func TestManualApproval(t *testing.T) {
	approved := &Plan{Name: "tfc-abc", PlanHash: "p2:x", Reason: captfv1.PlanReasonManual, Approved: true}
	check(t, Next, []rule{
		{"under Manual a change is planned first", with(applied(), manualEdit),
			Decision{Op: captfv1.OperationPlan, Reason: ReasonInputsChanged}},
		{"a pending plan waits for approval", with(applied(), func(i *Input) {
			manualEdit(i)
			i.Plan = &Plan{Name: "p", PlanHash: "p2:x", Reason: captfv1.PlanReasonManual}
		}), Decision{Reason: captfv1.PlanAwaitingApprovalReason, Wait: true}},
		{"an approved plan applies exactly what was approved", with(applied(), func(i *Input) { manualEdit(i); i.Plan = approved }),
			Decision{Op: captfv1.OperationApply, Reason: ReasonApproved, ExpectPlan: "p2:x", PlanName: "tfc-abc"}},
		{"an approved apply waits for a Job slot", with(applied(), func(i *Input) { manualEdit(i); i.Plan, i.Slots.Full = approved, true }), slotWait},
		{"a terminal plan is never applied again: plan anew", with(applied(), func(i *Input) {
			manualEdit(i)
			i.Plan = &Plan{Name: "p", PlanHash: "p2:x", Approved: true, Terminal: true}
		}), Decision{Op: captfv1.OperationPlan, Reason: ReasonInputsChanged}},
		{"a plan that no longer matched is planned again", with(applied(), func(i *Input) {
			manualEdit(i)
			i.LastChange = &Run{Result: captfv1.RunPlanChanged, FinishedAt: t0}
		}), Decision{Op: captfv1.OperationPlan, Reason: ReasonInputsChanged}},
	})
}

func TestDestructiveGuard(t *testing.T) {
	blocked := Decision{Reason: captfv1.DestructivePlanBlockedReason, Wait: true, RequeueAfter: 10 * time.Minute}
	check(t, Next, []rule{
		{"a blocked destructive apply waits for approval", with(applied(), func(i *Input) {
			changed(i)
			i.LastChange = &Run{Result: captfv1.RunBlocked, FinishedAt: t0}
		}), blocked},
		{"a pending destructive plan waits under Automatic too", with(applied(), func(i *Input) {
			changed(i)
			i.Plan = &Plan{Name: "tfc-abc", PlanHash: "p2:x", Reason: captfv1.PlanReasonDestructive}
		}), blocked},
		{"an approved destructive plan applies what was approved", with(applied(), func(i *Input) {
			changed(i)
			i.LastChange = &Run{Result: captfv1.RunBlocked, FinishedAt: t0}
			i.Plan = &Plan{Name: "d", PlanHash: "p2:d", Reason: captfv1.PlanReasonDestructive, Approved: true}
		}), Decision{Op: captfv1.OperationApply, Reason: ReasonApproved, ExpectPlan: "p2:d", PlanName: "d"}},
		{"an approved plan that no longer matched waits for its replacement", with(applied(), func(i *Input) {
			changed(i)
			i.LastChange = &Run{Result: captfv1.RunPlanChanged, FinishedAt: t0}
		}), Decision{Reason: captfv1.PlanChangedReason, Wait: true, RequeueAfter: 10 * time.Minute}},
	})
}

// TestApprovalsFailClosed: an approval counts only while the API server enforces the policies
// it rests on (who approves, what only the manager writes); an empty plan needs no approval.
func TestApprovalsFailClosed(t *testing.T) {
	unenforced := "the ValidatingAdmissionPolicy captf-plan-approval is missing"
	notHonoured := Decision{Reason: captfv1.ApprovalsNotEnforcedReason, Wait: true, RequeueAfter: 30 * time.Second}
	check(t, Next, []rule{
		{"an approved plan waits while approvals are not enforced", with(applied(), func(i *Input) {
			manualEdit(i)
			i.Plan = &Plan{Name: "tfc-abc", PlanHash: "p2:x", Approved: true}
			i.ApprovalsUnenforced = unenforced
		}), notHonoured},
		{"so does an approved destructive plan", with(applied(), func(i *Input) {
			changed(i)
			i.LastChange = &Run{Result: captfv1.RunBlocked, FinishedAt: t0}
			i.Plan = &Plan{Name: "d", PlanHash: "p2:d", Reason: captfv1.PlanReasonDestructive, Approved: true}
			i.ApprovalsUnenforced = unenforced
		}), notHonoured},
		{"an empty plan's implicit approval is nobody's and applies", with(applied(), func(i *Input) {
			changed(i)
			i.Plan = &Plan{PlanHash: "p2:empty", Approved: true}
			i.ApprovalsUnenforced = unenforced
		}), Decision{Op: captfv1.OperationApply, Reason: ReasonApproved, ExpectPlan: "p2:empty"}},
	})
}

func TestFailuresBackOff(t *testing.T) {
	check(t, Next, []rule{
		{"a failed apply waits a minute", with(applied(), func(i *Input) { changed(i); i.LastChange, i.Failures = failed(20*time.Second), 1 }),
			Decision{Reason: captfv1.ApplyFailedReason, Wait: true, RequeueAfter: 40 * time.Second}},
		{"the second failure waits two", with(applied(), func(i *Input) { changed(i); i.LastChange, i.Failures = failed(time.Minute), 2 }),
			Decision{Reason: captfv1.ApplyFailedReason, Wait: true, RequeueAfter: time.Minute}},
		{"from the history limit on it waits ten", with(applied(), func(i *Input) { changed(i); i.LastChange, i.Failures = failed(5*time.Minute), 3 }),
			Decision{Reason: captfv1.ApplyFailedReason, Wait: true, RequeueAfter: 5 * time.Minute}},
		{"the backoff never passes ten minutes", with(applied(), func(i *Input) {
			changed(i)
			i.LastChange, i.Failures, i.FailedJobsHistoryLimit = failed(0), 9, 20
		}), Decision{Reason: captfv1.ApplyFailedReason, Wait: true, RequeueAfter: 10 * time.Minute}},
		{"after the backoff the apply retries", with(applied(), func(i *Input) { changed(i); i.LastChange, i.Failures = failed(2*time.Minute), 1 }),
			Decision{Op: captfv1.OperationApply, Reason: ReasonRetry}},
		{"a failed first apply retries as an apply, even under Manual", with(fresh(), func(i *Input) {
			i.ApplyPolicy, i.LastChange, i.Failures = captfv1.ApplyPolicyManual, failed(2*time.Minute), 1
		}), Decision{Op: captfv1.OperationApply, Reason: ReasonRetry}},
		{"a failed destroy backs off too", with(applied(), func(i *Input) { i.Deleting, i.LastChange, i.Failures = true, failed(30*time.Second), 1 }),
			Decision{Reason: captfv1.DestroyFailedReason, Wait: true, RequeueAfter: 30 * time.Second}},
		{"and retries after it", with(applied(), func(i *Input) { i.Deleting, i.LastChange, i.Failures = true, failed(90*time.Second), 1 }),
			Decision{Op: captfv1.OperationDestroy, Reason: ReasonDestroy}},
	})
}

func TestDrift(t *testing.T) {
	due := func(i *Input) { i.DriftInterval, i.LastDriftCheck = 30*time.Minute, t0.Add(-time.Hour) }
	deferred := Decision{Reason: ReasonBackgroundDeferred, RequeueAfter: 15*time.Second + spread("uid-1", 45*time.Second)}
	check(t, Next, []rule{
		{"an up-to-date object looks again when its next drift check is due", with(applied(), func(i *Input) { i.DriftInterval = 30 * time.Minute }),
			Decision{Reason: ReasonUpToDate, RequeueAfter: DriftDue("uid-1", 30*time.Minute, t0.Add(-time.Minute), time.Time{}).Sub(t0)}},
		{"without schedules it waits for events", applied(), Decision{Reason: ReasonUpToDate}},
		{"a due drift check runs", with(applied(), due), Decision{Op: captfv1.OperationDrift, Reason: ReasonDriftDue}},
		{"an object never checked nor applied by a Job is first checked from its creation, not at once", with(applied(), func(i *Input) {
			i.DriftInterval, i.LastDriftCheck, i.Created = 30*time.Minute, time.Time{}, t0.Add(-time.Minute)
		}), Decision{Reason: ReasonUpToDate, RequeueAfter: DriftDue("uid-1", 30*time.Minute, time.Time{}, t0.Add(-time.Minute)).Sub(t0)}},
		{"background work yields above 80% of a cap, leaving the status as it is", with(applied(), func(i *Input) { due(i); i.Slots.Busy = true }), deferred},
		{"a due drift check waits for the drift budget", with(applied(), func(i *Input) { due(i); i.Slots.DriftFull = true }), deferred},
		{"an apply does not wait for the drift budget", with(applied(), func(i *Input) { due(i); changed(i); i.Slots.DriftFull = true }), applyNow},
		{"an apply starts above 80% of a cap, where drift yields", with(applied(), func(i *Input) { due(i); changed(i); i.Slots.Busy = true }), applyNow},
		{"a destroy starts above 80% of a cap, where drift yields", with(applied(), func(i *Input) { due(i); i.Deleting, i.Slots.Busy = true, true }),
			Decision{Op: captfv1.OperationDestroy, Reason: ReasonDestroy}},
		{"a drift check due with a change applies the change", with(applied(), func(i *Input) { due(i); changed(i) }), applyNow},
		{"a pool's membership refresh does not wait for the drift budget", with(applied(), func(i *Input) {
			i.MembershipInterval, i.LastRefresh, i.Slots.DriftFull = time.Minute, t0.Add(-2*time.Minute), true
		}), Decision{Op: captfv1.OperationRefresh, Reason: ReasonMembershipRefresh}},
		{"drift with Remediate re-applies", with(applied(), func(i *Input) { i.DriftFound, i.DriftAction = true, captfv1.DriftActionRemediate }),
			Decision{Op: captfv1.OperationApply, Reason: ReasonDriftRemediation}},
		{"drift with Report only reports", with(applied(), func(i *Input) { i.DriftFound, i.DriftAction = true, captfv1.DriftActionReport }),
			Decision{Reason: ReasonUpToDate}},
		{"remediation stops after the history limit's failures", with(applied(), func(i *Input) {
			i.DriftFound, i.DriftAction, i.DriftRemediations = true, captfv1.DriftActionRemediate, 3
		}), Decision{Reason: ReasonUpToDate}},
		{"machines never remediate", with(applied(), func(i *Input) {
			i.Mutable, i.DriftFound, i.DriftAction = false, true, captfv1.DriftActionRemediate
		}), Decision{Reason: ReasonUpToDate}},
	})
}

// TestDriftChecksSpreadOverTheInterval: a fleet created at one instant (a bring-up, or 10,000
// copies adopted at once) is checked evenly over the interval, not in one wave; a check that
// ran on time is followed by the next exactly one interval later (so the spread holds round
// after round, and, being a function of the recorded check only, across restarts); a late
// check's successor comes at least half an interval after it.
func TestDriftChecksSpreadOverTheInterval(t *testing.T) {
	const n, interval, buckets = 10000, 30 * time.Minute, 30
	counts := make([]int, buckets)
	for i := range n {
		uid := uuid.NewSHA1(uuid.NameSpaceOID, []byte(strconv.Itoa(i))).String()
		first := DriftDue(uid, interval, time.Time{}, t0)
		if first.Before(t0.Add(interval/2)) || !first.Before(t0.Add(3*interval/2)) {
			t.Fatalf("%s: first check at %s, want within [%s, %s)", uid, first, t0.Add(interval/2), t0.Add(3*interval/2))
		}
		counts[int(first.Sub(t0.Add(interval/2))/(interval/buckets))]++
		for _, ran := range []time.Duration{0, 90 * time.Second, interval/2 - time.Second} {
			if next := DriftDue(uid, interval, first.Add(ran), t0); next.Sub(first) != interval {
				t.Fatalf("%s: a check %s after its time is followed %s later, want one interval", uid, ran, next.Sub(first))
			}
		}
		late := first.Add(interval)
		if next := DriftDue(uid, interval, late, t0); next.Before(late.Add(interval/2)) || !next.Before(late.Add(3*interval/2)) {
			t.Fatalf("%s: after a late check at %s the next is at %s", uid, late, next)
		}
	}
	mean := n / buckets
	for b, c := range counts {
		if c < mean*3/4 || c > mean*5/4 {
			t.Errorf("minute %d of the interval holds %d first checks, want %d ±25%% (all: %v)", b, c, mean, counts)
		}
	}
	if !DriftDue("uid-1", interval, time.Time{}, time.Time{}).IsZero() {
		t.Error("an object with neither a check nor a creation time is due at once")
	}
}

func TestRefreshes(t *testing.T) {
	check(t, Next, []rule{
		{"pending health refreshes after 30 s", with(applied(), func(i *Input) { i.HealthPending, i.LastRefresh = true, t0.Add(-31*time.Second) }),
			Decision{Op: captfv1.OperationRefresh, Reason: ReasonHealthPending}},
		{"pending health backs off to five minutes", with(applied(), func(i *Input) {
			i.HealthPending, i.PendingRefreshes, i.LastRefresh = true, 8, t0.Add(-4*time.Minute)
		}), Decision{Reason: ReasonUpToDate, RequeueAfter: time.Minute}},
		{"a pool's membership is refreshed at its interval", with(applied(), func(i *Input) {
			i.MembershipInterval, i.LastRefresh = time.Minute, t0.Add(-2*time.Minute)
		}), Decision{Op: captfv1.OperationRefresh, Reason: ReasonMembershipRefresh}},
		// CAPI matches the pool's Nodes by its instances, and an approval may take days; a
		// refresh that finds nothing writes no state, so the plan's serial stays (runner).
		{"a held pool's membership is refreshed while its plan waits for approval", with(applied(), func(i *Input) {
			i.MembershipInterval, i.LastRefresh = time.Minute, t0.Add(-2*time.Minute)
			i.Plan = &Plan{Name: "p", PlanHash: "p2:x", Reason: captfv1.PlanReasonDestructive}
		}), Decision{Op: captfv1.OperationRefresh, Reason: ReasonMembershipRefresh}},
	})
}

func TestUntrustedStateHoldsEverything(t *testing.T) {
	hold := func(reason string) Decision { return Decision{Reason: reason, Wait: true, RequeueAfter: time.Minute} }
	check(t, Next, []rule{
		{"an encrypted state runs nothing", with(applied(), func(i *Input) { i.State.Unreadable = captfv1.StateEncryptedReason }),
			hold(captfv1.StateEncryptedReason)},
		{"a corrupt state never applies new inputs", with(applied(), func(i *Input) { i.State.Unreadable = captfv1.StateCorruptReason; changed(i) }),
			hold(captfv1.StateCorruptReason)},
		{"a lost state is never re-applied (that would build a second set)", with(applied(), func(i *Input) { i.State = State{} }),
			hold(ReasonStateLost)},
		{"a lost state holds its deletion", with(applied(), func(i *Input) { i.Deleting, i.State = true, State{} }), hold(ReasonStateLost)},
		{"an unreadable state holds its deletion", with(applied(), func(i *Input) { i.Deleting, i.State.Unreadable = true, captfv1.StateEncryptedReason }),
			hold(captfv1.StateEncryptedReason)},
	})
}

func TestRestore(t *testing.T) {
	restore := Decision{Op: captfv1.OperationRestore, Reason: ReasonRestoreRequested}
	backup := &Restore{Serial: 4, BackupFound: true}
	check(t, Next, []rule{
		{"a requested backup is restored, before any change", with(applied(), func(i *Input) { i.Restore = backup; changed(i) }), restore},
		{"a restore repairs a corrupt state", with(applied(), func(i *Input) { i.State.Unreadable, i.Restore = captfv1.StateCorruptReason, backup }), restore},
		{"a restore brings back a lost state", with(applied(), func(i *Input) { i.State, i.Restore = State{}, backup }), restore},
		{"a held deletion may restore first", with(applied(), func(i *Input) { i.Deleting, i.State, i.Restore = true, State{}, backup }), restore},
		{"a readable state ignores a restore while deleting", with(applied(), func(i *Input) { i.Deleting, i.Restore = true, backup }),
			Decision{Op: captfv1.OperationDestroy, Reason: ReasonDestroy}},
		{"a missing backup waits for the request to change", with(applied(), func(i *Input) { i.Restore = &Restore{Serial: 4} }),
			Decision{Reason: captfv1.RestoreBackupNotFoundReason, Wait: true}},
		{"a restore waits for the inputs its Job runs with", with(applied(), func(i *Input) {
			i.Restore, i.InputsHash, i.InputsWait = backup, "", captfv1.VariablesSourceNotFoundReason
		}), Decision{Reason: captfv1.VariablesSourceNotFoundReason, Wait: true}},
		{"a serial is restored once", with(applied(), func(i *Input) { i.Restore = &Restore{Serial: 4, BackupFound: true, Done: true} }),
			Decision{Reason: ReasonUpToDate}},
		{"a restore waits for a Job slot", with(applied(), func(i *Input) { i.Restore, i.Slots.Full = backup, true }), slotWait},
	})
}

func TestDeletion(t *testing.T) {
	destroy := Decision{Op: captfv1.OperationDestroy, Reason: ReasonDestroy}
	deleting := func(i *Input) { i.Deleting = true }
	check(t, Next, []rule{
		{"a deleted object destroys", with(applied(), deleting), destroy},
		{"with the inputs it was applied with, whatever the current ones", with(applied(), func(i *Input) { i.Deleting, i.InputsHash = true, "" }), destroy},
		{"a cluster waits for its machines and pools", with(applied(), func(i *Input) { i.Deleting, i.DependentsExist = true, true }),
			Decision{Reason: captfv1.DependentsExistReason, Wait: true, RequeueAfter: time.Minute}},
		{"Retain keeps everything and lets the finalizer go", with(applied(), func(i *Input) { deleting(i); i.DeletionPolicy = captfv1.DeletionPolicyRetain }),
			Decision{Reason: ReasonRetain, Retain: true}},
		{"never applied: the finalizer goes", with(fresh(), deleting), Decision{Reason: ReasonNothingToDestroy, Finalize: true}},
		{"an empty state: the finalizer goes", with(applied(), func(i *Input) { i.Deleting, i.State.Resources = true, 0 }),
			Decision{Reason: ReasonNothingToDestroy, Finalize: true}},
		{"a machine without the inputs it was applied with is never destroyed with others", with(applied(), func(i *Input) {
			i.Deleting, i.Mutable, i.DurableInputs = true, false, false
		}), Decision{Reason: ReasonDurableInputsGone, Wait: true, RequeueAfter: time.Minute}},
		{"a cluster without durable inputs destroys with its current ones", with(applied(), func(i *Input) { i.Deleting, i.DurableInputs = true, false }), destroy},
		{"a cluster without any inputs waits for them", with(applied(), func(i *Input) {
			i.Deleting, i.DurableInputs, i.InputsHash, i.InputsWait = true, false, "", captfv1.WaitingForOwnerReason
		}), Decision{Reason: captfv1.WaitingForOwnerReason, Wait: true, RequeueAfter: time.Minute}},
		{"a destroy waits for a Job slot", with(applied(), func(i *Input) { i.Deleting, i.Slots.Full = true, true }), slotWait},
	})
}

// TestNamespaceDeletion: a namespace being deleted creates nothing, so the destroy of what the
// state records runs on a copy in the destroy namespace, and the object goes only once that copy
// destroyed everything.
func TestNamespaceDeletion(t *testing.T) {
	terminating := func(elsewhere bool, phase CopyPhase) func(*Input) {
		return func(i *Input) { deleting(i); i.Terminating = &Terminating{Elsewhere: elsewhere, Copy: phase} }
	}
	relocate := Decision{Reason: ReasonDestroyingElsewhere, Relocate: true}
	held := Decision{Reason: ReasonNamespaceTerminating, Wait: true, RequeueAfter: time.Minute}
	check(t, Next, []rule{
		{"the destroy is handed to a copy in the destroy namespace", with(applied(), terminating(true, CopyNone)), relocate},
		{"a copy not handed over yet is finished", with(applied(), terminating(true, CopyPending)), relocate},
		{"the object waits while its copy destroys", with(applied(), terminating(true, CopyDestroying)),
			Decision{Reason: ReasonDestroyingElsewhere, Wait: true, RequeueAfter: time.Minute}},
		{"and goes once the copy left nothing", with(applied(), terminating(true, CopyDone)),
			Decision{Reason: ReasonDestroyedElsewhere, Finalize: true}},
		{"a copy gone with resources left holds the deletion", with(applied(), terminating(true, CopyLeftState)), held},
		{"without a destroy namespace the deletion holds", with(applied(), terminating(false, CopyNone)), held},
		{"dependents are destroyed first", with(applied(), func(i *Input) { terminating(true, CopyNone)(i); i.DependentsExist = true }),
			Decision{Reason: captfv1.DependentsExistReason, Wait: true, RequeueAfter: time.Minute}},
		{"Retain still keeps everything", with(applied(), func(i *Input) {
			terminating(true, CopyNone)(i)
			i.DeletionPolicy = captfv1.DeletionPolicyRetain
		}), Decision{Reason: ReasonRetain, Retain: true}},
		{"an unreadable state is never copied", with(applied(), func(i *Input) { terminating(true, CopyNone)(i); i.State.Unreadable = captfv1.StateCorruptReason }),
			Decision{Reason: captfv1.StateCorruptReason, Wait: true, RequeueAfter: time.Minute}},
		{"an empty state needs no copy", with(applied(), func(i *Input) { terminating(true, CopyNone)(i); i.State.Resources = 0 }),
			Decision{Reason: ReasonNothingToDestroy, Finalize: true}},
		{"nor does an object never applied", with(fresh(), terminating(true, CopyNone)), Decision{Reason: ReasonNothingToDestroy, Finalize: true}},
	})
}

func TestJobCapsFailClosed(t *testing.T) {
	uncounted := func(i *Input) { i.Slots = Slots{Uncounted: true} }
	check(t, Next, []rule{
		{"Jobs that cannot be counted keep an apply waiting", with(applied(), func(i *Input) { changed(i); uncounted(i) }), slotWait},
		{"and a first apply", with(fresh(), uncounted), slotWait},
		{"and a destroy", with(applied(), func(i *Input) { deleting(i); uncounted(i) }), slotWait},
		{"and a restore", with(applied(), func(i *Input) { i.Restore = &Restore{Serial: 4, BackupFound: true}; uncounted(i) }), slotWait},
		{"and background work", with(applied(), func(i *Input) { i.DriftInterval, i.LastDriftCheck = time.Minute, t0.Add(-time.Hour); uncounted(i) }), slotWait},
		{"a finalizer with nothing to destroy still goes", with(fresh(), func(i *Input) { deleting(i); uncounted(i) }),
			Decision{Reason: ReasonNothingToDestroy, Finalize: true}},
	})
}

func deleting(i *Input) { i.Deleting = true }

func TestAStartIsCheckedFirst(t *testing.T) {
	unchecked := func(i *Input) { i.Start = Start{} }
	pending := func(op captfv1.Operation, reason string, after time.Duration) Decision {
		return Decision{Reason: reason, Wait: true, RequeueAfter: after, Pending: op}
	}
	apply := captfv1.OperationApply
	check(t, Next, []rule{
		{"a due operation is not started before its start is checked", with(applied(), func(i *Input) { changed(i); unchecked(i) }),
			Decision{Op: apply, Reason: ReasonInputsChanged, CheckStart: true}},
		{"a checked start with nothing in its way starts", with(applied(), changed), applyNow},
		{"an object with nothing due checks nothing", with(applied(), unchecked), Decision{Reason: ReasonUpToDate}},
		{"an invalid Job policy waits for the spec to be fixed", with(applied(), func(i *Input) { changed(i); i.Start.PolicyInvalid = true }),
			pending(apply, captfv1.JobPolicyInvalidReason, 0)},
		{"a ServiceAccount that may not run Jobs is looked at again every minute", with(applied(), func(i *Input) {
			changed(i)
			i.Start.ServiceAccountInvalid = true
		}), pending(apply, captfv1.JobPolicyInvalidReason, time.Minute)},
		{"missing credentials wait a minute", with(applied(), func(i *Input) { changed(i); i.CredentialsMissing = true }),
			pending(apply, captfv1.CredentialsNotFoundReason, time.Minute)},
		{"even a destroy, which runs with the durable inputs, needs the credentials", with(applied(), func(i *Input) {
			deleting(i)
			i.CredentialsMissing = true
		}), pending(captfv1.OperationDestroy, captfv1.CredentialsNotFoundReason, time.Minute)},
		{"a backup that fails its checks is never pushed", with(applied(), func(i *Input) {
			i.Restore, i.Start.BackupInvalid = &Restore{Serial: 4, BackupFound: true}, true
		}), pending(captfv1.OperationRestore, captfv1.RestoreBackupInvalidReason, 0)},
		{"only a restore reads the backup check", with(applied(), func(i *Input) { changed(i); i.Start.BackupInvalid = true }), applyNow},
		{"quota refusal waits a minute", with(applied(), func(i *Input) {
			changed(i)
			i.Start.LastRefusal = &Refusal{Reason: captfv1.QuotaExceededReason, At: t0.Add(-20 * time.Second)}
		}), pending(apply, captfv1.QuotaExceededReason, 40*time.Second)},
		{"a minute after the refusal the Job is asked for again", with(applied(), func(i *Input) {
			changed(i)
			i.Start.LastRefusal = &Refusal{Reason: captfv1.QuotaExceededReason, At: t0.Add(-time.Minute)}
		}), applyNow},
		{"a run lease held by a Job not listed yet waits 30 s", with(applied(), func(i *Input) { changed(i); i.Start.Leases.RunHeld = true }),
			pending(apply, captfv1.WaitingForRunLeaseReason, 30*time.Second)},
	})
}

func TestClusterOperationGate(t *testing.T) {
	gated := func(cluster bool) func(*Input) {
		return func(i *Input) { i.Start.Leases.Gate, i.Start.Leases.Cluster = true, cluster }
	}
	clusterWaits := Decision{Reason: captfv1.WaitingForMachineOperationsReason, Wait: true, RequeueAfter: 30 * time.Second,
		Pending: captfv1.OperationApply, ClaimLeases: true}
	check(t, Next, []rule{
		{"a member waits while its cluster's mutating Job runs", with(applied(), func(i *Input) {
			changed(i)
			gated(false)(i)
			i.Start.Leases.ClusterHeld = true
		}), Decision{Reason: captfv1.WaitingForClusterOperationReason, Wait: true, RequeueAfter: 30 * time.Second, Pending: captfv1.OperationApply}},
		{"a member's read-only work waits for the cluster too", with(applied(), func(i *Input) {
			i.DriftInterval, i.LastDriftCheck = time.Minute, t0.Add(-time.Hour)
			gated(false)(i)
			i.Start.Leases.ClusterHeld = true
		}), Decision{Reason: captfv1.WaitingForClusterOperationReason, Wait: true, RequeueAfter: 30 * time.Second, Pending: captfv1.OperationDrift}},
		{"a cluster's apply waits for its members' mutating Jobs and claims its leases (writers are preferred)", with(applied(), func(i *Input) {
			changed(i)
			gated(true)(i)
			i.Start.Leases.MembersBusy = true
		}), clusterWaits},
		{"a cluster's read-only work does not wait for its members", with(applied(), func(i *Input) {
			i.DriftInterval, i.LastDriftCheck = time.Minute, t0.Add(-time.Hour)
			gated(true)(i)
			i.Start.Leases.MembersBusy = true
		}), Decision{Op: captfv1.OperationDrift, Reason: ReasonDriftDue}},
		{"without the gate nobody waits for the other", with(applied(), func(i *Input) {
			changed(i)
			i.Start.Leases.ClusterHeld, i.Start.Leases.MembersBusy = true, true
		}), applyNow},
	})
}

func TestJitterIsBoundedAndStable(t *testing.T) {
	for _, uid := range []string{"a", "b", "c", "0f2c-11"} {
		j := jitter(uid, time.Hour)
		if j < time.Hour || j > time.Hour+6*time.Minute {
			t.Errorf("jitter(%s) = %v, want within [1h, 1h6m]", uid, j)
		}
		if j != jitter(uid, time.Hour) {
			t.Errorf("jitter(%s) is not deterministic", uid)
		}
	}
}

// The pause promise: a paused object's namespace sees no create and no delete from the
// manager, so only the results whose recording writes status and existing objects are
// recorded while paused; a plan (which creates its TerraformPlan) waits for the unpause.
func TestRecordedWhilePaused(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   captfv1.Operation
		res  captfv1.RunResult
		want bool
	}{
		{"an apply that succeeded: status and the state's record", captfv1.OperationApply, captfv1.RunSucceeded, true},
		{"an apply that failed: status only", captfv1.OperationApply, captfv1.RunFailed, true},
		{"an apply the guard blocked creates its plan: waits", captfv1.OperationApply, captfv1.RunBlocked, false},
		{"an apply whose plan changed creates a plan: waits", captfv1.OperationApply, captfv1.RunPlanChanged, false},
		{"a plan creates its TerraformPlan: waits", captfv1.OperationPlan, captfv1.RunSucceeded, false},
		{"a plan that failed creates nothing", captfv1.OperationPlan, captfv1.RunFailed, true},
		{"a refresh", captfv1.OperationRefresh, captfv1.RunSucceeded, true},
		{"a drift check", captfv1.OperationDrift, captfv1.RunSucceeded, true},
		{"a restore: status and the plans that exist", captfv1.OperationRestore, captfv1.RunSucceeded, true},
		{"a destroy", captfv1.OperationDestroy, captfv1.RunSucceeded, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RecordedWhilePaused(tc.op, tc.res); got != tc.want {
				t.Errorf("RecordedWhilePaused(%s, %s) = %v, want %v", tc.op, tc.res, got, tc.want)
			}
		})
	}
}
