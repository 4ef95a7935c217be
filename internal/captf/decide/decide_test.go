package decide

import (
	"testing"
	"time"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// applied is a mutable object whose state matches its inputs: nothing to do.
func applied() Input {
	return Input{
		Now: t0, UID: "uid-1", Mutable: true,
		DeletionPolicy: captfv1.DeletionPolicyDestroy, ApplyPolicy: captfv1.ApplyPolicyAutomatic,
		State:       State{Present: true, InputsHash: "h2:a", Resources: 3},
		EverApplied: true, InputsHash: "h2:a", DurableInputs: true,
		FailedJobsHistoryLimit: 3,
		LastDriftCheck:         t0.Add(-time.Minute), LastRefresh: t0.Add(-time.Minute),
	}
}

func fresh() Input {
	in := applied()
	in.State, in.EverApplied, in.DurableInputs = State{}, false, false
	in.LastDriftCheck, in.LastRefresh = time.Time{}, time.Time{}
	return in
}

func with(in Input, f func(*Input)) Input { f(&in); return in }

func TestNext(t *testing.T) {
	approvedPlan := &Plan{Name: "tfc-abc", PlanHash: "p2:x", Reason: captfv1.PlanReasonManual, Approved: true}
	pendingPlan := &Plan{Name: "tfc-abc", PlanHash: "p2:x", Reason: captfv1.PlanReasonDestructive}
	failed := func(ago time.Duration) *Run { return &Run{Result: captfv1.RunFailed, FinishedAt: t0.Add(-ago)} }

	cases := []struct {
		name string
		in   Input
		want Decision
	}{
		// A running Job wins over everything.
		{"active job waits", with(fresh(), func(i *Input) { i.ActiveJob = true; i.Deleting = true }),
			Decision{Reason: ReasonJobRunning, Wait: true, RequeueAfter: time.Minute}},

		// First apply.
		{"no state applies", fresh(), Decision{Op: captfv1.OperationApply, Reason: ReasonNoState}},
		{"no state applies even under Manual", with(fresh(), func(i *Input) { i.ApplyPolicy = captfv1.ApplyPolicyManual }),
			Decision{Op: captfv1.OperationApply, Reason: ReasonNoState}},
		{"no state waits for inputs", with(fresh(), func(i *Input) {
			i.InputsHash, i.InputsWait = "", captfv1.WaitingForBootstrapDataReason
		}), Decision{Reason: captfv1.WaitingForBootstrapDataReason, Wait: true}},
		{"no state at the job cap waits for a slot", with(fresh(), func(i *Input) { i.Slots.Full = true }),
			Decision{Reason: captfv1.WaitingForJobSlotReason, Wait: true, RequeueAfter: 15 * time.Second}},

		// Up to date.
		{"up to date requeues at the drift interval", with(applied(), func(i *Input) { i.DriftInterval = 30 * time.Minute }),
			Decision{Reason: ReasonUpToDate, RequeueAfter: 30*time.Minute + jitter("uid-1", 30*time.Minute) - 30*time.Minute - time.Minute}},
		{"up to date without schedules waits for events", applied(), Decision{Reason: ReasonUpToDate}},

		// Changed inputs.
		{"changed inputs re-apply a cluster", with(applied(), func(i *Input) { i.InputsHash = "h2:b" }),
			Decision{Op: captfv1.OperationApply, Reason: ReasonInputsChanged}},
		{"changed inputs never re-apply a machine", with(applied(), func(i *Input) { i.Mutable = false; i.InputsHash = "h2:b" }),
			Decision{Reason: ReasonUpToDate}},
		{"state without hash finishes the apply", with(applied(), func(i *Input) { i.State.InputsHash = "" }),
			Decision{Op: captfv1.OperationApply, Reason: ReasonStateWithoutHash}},
		{"state without hash finishes a machine's apply too", with(applied(), func(i *Input) { i.Mutable = false; i.State.InputsHash = "" }),
			Decision{Op: captfv1.OperationApply, Reason: ReasonStateWithoutHash}},
		{"changed inputs under Manual plan first", with(applied(), func(i *Input) {
			i.InputsHash, i.ApplyPolicy = "h2:b", captfv1.ApplyPolicyManual
		}), Decision{Op: captfv1.OperationPlan, Reason: ReasonInputsChanged}},
		{"pending Manual plan waits for approval", with(applied(), func(i *Input) {
			i.InputsHash, i.ApplyPolicy = "h2:b", captfv1.ApplyPolicyManual
			i.Plan = &Plan{Name: "p", PlanHash: "p2:x", Reason: captfv1.PlanReasonManual}
		}), Decision{Reason: captfv1.PlanAwaitingApprovalReason, Wait: true}},
		{"approved plan applies what was approved", with(applied(), func(i *Input) {
			i.InputsHash, i.ApplyPolicy, i.Plan = "h2:b", captfv1.ApplyPolicyManual, approvedPlan
		}), Decision{Op: captfv1.OperationApply, Reason: ReasonApproved, ExpectPlan: "p2:x", PlanName: "tfc-abc"}},
		{"terminal plan is not reused: plan again", with(applied(), func(i *Input) {
			i.InputsHash, i.ApplyPolicy = "h2:b", captfv1.ApplyPolicyManual
			i.Plan = &Plan{Name: "p", PlanHash: "p2:x", Approved: true, Terminal: true}
		}), Decision{Op: captfv1.OperationPlan, Reason: ReasonInputsChanged}},

		// Destructive-plan guard.
		{"blocked destructive apply waits for approval", with(applied(), func(i *Input) {
			i.InputsHash, i.LastChange = "h2:b", &Run{Result: captfv1.RunBlocked, FinishedAt: t0}
		}), Decision{Reason: captfv1.DestructivePlanBlockedReason, Wait: true, RequeueAfter: 10 * time.Minute}},
		{"pending destructive plan waits under Automatic", with(applied(), func(i *Input) {
			i.InputsHash, i.Plan = "h2:b", pendingPlan
		}), Decision{Reason: captfv1.DestructivePlanBlockedReason, Wait: true, RequeueAfter: 10 * time.Minute}},
		{"approved destructive plan applies", with(applied(), func(i *Input) {
			i.InputsHash, i.LastChange = "h2:b", &Run{Result: captfv1.RunBlocked, FinishedAt: t0}
			i.Plan = &Plan{Name: "d", PlanHash: "p2:d", Reason: captfv1.PlanReasonDestructive, Approved: true}
		}), Decision{Op: captfv1.OperationApply, Reason: ReasonApproved, ExpectPlan: "p2:d", PlanName: "d"}},
		{"approved apply at the job cap waits", with(applied(), func(i *Input) {
			i.InputsHash, i.Plan, i.Slots.Full = "h2:b", approvedPlan, true
		}), Decision{Reason: captfv1.WaitingForJobSlotReason, Wait: true, RequeueAfter: 15 * time.Second}},
		{"plan changed under Automatic waits for the new plan", with(applied(), func(i *Input) {
			i.InputsHash, i.LastChange = "h2:b", &Run{Result: captfv1.RunPlanChanged, FinishedAt: t0}
		}), Decision{Reason: captfv1.PlanChangedReason, Wait: true, RequeueAfter: 10 * time.Minute}},
		{"plan changed under Manual plans again", with(applied(), func(i *Input) {
			i.InputsHash, i.ApplyPolicy = "h2:b", captfv1.ApplyPolicyManual
			i.LastChange = &Run{Result: captfv1.RunPlanChanged, FinishedAt: t0}
		}), Decision{Op: captfv1.OperationPlan, Reason: ReasonInputsChanged}},

		// Retries.
		{"failed apply backs off one minute", with(applied(), func(i *Input) {
			i.InputsHash, i.LastChange, i.Failures = "h2:b", failed(20*time.Second), 1
		}), Decision{Reason: captfv1.ApplyFailedReason, Wait: true, RequeueAfter: 40 * time.Second}},
		{"second failure backs off two minutes", with(applied(), func(i *Input) {
			i.InputsHash, i.LastChange, i.Failures = "h2:b", failed(time.Minute), 2
		}), Decision{Reason: captfv1.ApplyFailedReason, Wait: true, RequeueAfter: time.Minute}},
		{"at the history limit the backoff is ten minutes", with(applied(), func(i *Input) {
			i.InputsHash, i.LastChange, i.Failures = "h2:b", failed(5*time.Minute), 3
		}), Decision{Reason: captfv1.ApplyFailedReason, Wait: true, RequeueAfter: 5 * time.Minute}},
		{"backoff caps at ten minutes", with(applied(), func(i *Input) {
			i.InputsHash, i.LastChange, i.Failures, i.FailedJobsHistoryLimit = "h2:b", failed(0), 9, 20
		}), Decision{Reason: captfv1.ApplyFailedReason, Wait: true, RequeueAfter: 10 * time.Minute}},
		{"after the backoff the apply retries", with(applied(), func(i *Input) {
			i.InputsHash, i.LastChange, i.Failures = "h2:b", failed(2*time.Minute), 1
		}), Decision{Op: captfv1.OperationApply, Reason: ReasonRetry}},
		{"a failed first apply retries as an apply under Manual", with(fresh(), func(i *Input) {
			i.ApplyPolicy, i.LastChange, i.Failures = captfv1.ApplyPolicyManual, failed(2*time.Minute), 1
		}), Decision{Op: captfv1.OperationApply, Reason: ReasonRetry}},

		// Drift.
		{"drift check due", with(applied(), func(i *Input) {
			i.DriftInterval, i.LastDriftCheck = 30*time.Minute, t0.Add(-time.Hour)
		}), Decision{Op: captfv1.OperationDrift, Reason: ReasonDriftDue}},
		{"drift check waits when the slots are busy", with(applied(), func(i *Input) {
			i.DriftInterval, i.LastDriftCheck, i.Slots.Busy = 30*time.Minute, t0.Add(-time.Hour), true
		}), Decision{Reason: captfv1.WaitingForJobSlotReason, Wait: true, RequeueAfter: 15 * time.Second}},
		{"drift with Remediate re-applies", with(applied(), func(i *Input) {
			i.DriftFound, i.DriftAction = true, captfv1.DriftActionRemediate
		}), Decision{Op: captfv1.OperationApply, Reason: ReasonDriftRemediation}},
		{"drift with Report does not", with(applied(), func(i *Input) {
			i.DriftFound, i.DriftAction = true, captfv1.DriftActionReport
		}), Decision{Reason: ReasonUpToDate}},
		{"remediation stops at the cap", with(applied(), func(i *Input) {
			i.DriftFound, i.DriftAction, i.DriftRemediations = true, captfv1.DriftActionRemediate, 3
		}), Decision{Reason: ReasonUpToDate}},
		{"machines never remediate", with(applied(), func(i *Input) {
			i.Mutable, i.DriftFound, i.DriftAction = false, true, captfv1.DriftActionRemediate
		}), Decision{Reason: ReasonUpToDate}},

		// Refreshes.
		{"pending health refreshes after 30s", with(applied(), func(i *Input) {
			i.HealthPending, i.LastRefresh = true, t0.Add(-31*time.Second)
		}), Decision{Op: captfv1.OperationRefresh, Reason: ReasonHealthPending}},
		{"pending health backs off to the cap", with(applied(), func(i *Input) {
			i.HealthPending, i.PendingRefreshes, i.LastRefresh = true, 8, t0.Add(-4*time.Minute)
		}), Decision{Reason: ReasonUpToDate, RequeueAfter: time.Minute}},
		{"pool membership refresh", with(applied(), func(i *Input) {
			i.MembershipInterval, i.LastRefresh = time.Minute, t0.Add(-2*time.Minute)
		}), Decision{Op: captfv1.OperationRefresh, Reason: ReasonMembershipRefresh}},

		// Unreadable or lost state.
		{"encrypted state waits", with(applied(), func(i *Input) { i.State.Unreadable = captfv1.StateEncryptedReason }),
			Decision{Reason: captfv1.StateEncryptedReason, Wait: true, RequeueAfter: time.Minute}},
		{"corrupt state never applies new inputs", with(applied(), func(i *Input) {
			i.State.Unreadable, i.InputsHash = captfv1.StateCorruptReason, "h2:b"
		}), Decision{Reason: captfv1.StateCorruptReason, Wait: true, RequeueAfter: time.Minute}},
		{"lost state is never re-applied", with(applied(), func(i *Input) { i.State = State{} }),
			Decision{Reason: ReasonStateLost, Wait: true, RequeueAfter: time.Minute}},

		// Restore.
		{"restore of an existing backup", with(applied(), func(i *Input) {
			i.Restore = &Restore{Serial: 4, BackupFound: true}
			i.InputsHash = "h2:b"
		}), Decision{Op: captfv1.OperationRestore, Reason: ReasonRestoreRequested}},
		{"restore repairs a corrupt state", with(applied(), func(i *Input) {
			i.State.Unreadable, i.Restore = captfv1.StateCorruptReason, &Restore{Serial: 4, BackupFound: true}
		}), Decision{Op: captfv1.OperationRestore, Reason: ReasonRestoreRequested}},
		{"restore of a lost state", with(applied(), func(i *Input) {
			i.State, i.Restore = State{}, &Restore{Serial: 4, BackupFound: true}
		}), Decision{Op: captfv1.OperationRestore, Reason: ReasonRestoreRequested}},
		{"restore without a backup waits", with(applied(), func(i *Input) { i.Restore = &Restore{Serial: 4} }),
			Decision{Reason: captfv1.RestoreBackupNotFoundReason, Wait: true}},
		{"a restored serial is not restored again", with(applied(), func(i *Input) {
			i.Restore = &Restore{Serial: 4, BackupFound: true, Done: true}
		}), Decision{Reason: ReasonUpToDate}},

		// Deletion.
		{"deleting destroys", with(applied(), func(i *Input) { i.Deleting = true }),
			Decision{Op: captfv1.OperationDestroy, Reason: ReasonDestroy}},
		{"deleting destroys even with changed inputs", with(applied(), func(i *Input) { i.Deleting, i.InputsHash = true, "" }),
			Decision{Op: captfv1.OperationDestroy, Reason: ReasonDestroy}},
		{"deleting cluster waits for its machines", with(applied(), func(i *Input) { i.Deleting, i.DependentsExist = true, true }),
			Decision{Reason: captfv1.DependentsExistReason, Wait: true, RequeueAfter: time.Minute}},
		{"Retain keeps everything", with(applied(), func(i *Input) {
			i.Deleting, i.DeletionPolicy = true, captfv1.DeletionPolicyRetain
		}), Decision{Reason: ReasonRetain, Retain: true}},
		{"never applied: finalizer goes", with(fresh(), func(i *Input) { i.Deleting = true }),
			Decision{Reason: ReasonNothingToDestroy, Finalize: true}},
		{"empty state: finalizer goes", with(applied(), func(i *Input) { i.Deleting, i.State.Resources = true, 0 }),
			Decision{Reason: ReasonNothingToDestroy, Finalize: true}},
		{"lost state holds the deletion", with(applied(), func(i *Input) { i.Deleting, i.State = true, State{} }),
			Decision{Reason: ReasonStateLost, Wait: true, RequeueAfter: time.Minute}},
		{"unreadable state holds the deletion", with(applied(), func(i *Input) {
			i.Deleting, i.State.Unreadable = true, captfv1.StateEncryptedReason
		}), Decision{Reason: captfv1.StateEncryptedReason, Wait: true, RequeueAfter: time.Minute}},
		{"held deletion may restore first", with(applied(), func(i *Input) {
			i.Deleting, i.State, i.Restore = true, State{}, &Restore{Serial: 4, BackupFound: true}
		}), Decision{Op: captfv1.OperationRestore, Reason: ReasonRestoreRequested}},
		{"readable state ignores a restore while deleting", with(applied(), func(i *Input) {
			i.Deleting, i.Restore = true, &Restore{Serial: 4, BackupFound: true}
		}), Decision{Op: captfv1.OperationDestroy, Reason: ReasonDestroy}},
		{"a machine without its applied inputs cannot destroy", with(applied(), func(i *Input) {
			i.Deleting, i.Mutable, i.DurableInputs = true, false, false
		}), Decision{Reason: ReasonDurableInputsGone, Wait: true, RequeueAfter: time.Minute}},
		{"a cluster without durable inputs destroys with current ones", with(applied(), func(i *Input) {
			i.Deleting, i.DurableInputs = true, false
		}), Decision{Op: captfv1.OperationDestroy, Reason: ReasonDestroy}},
		{"a cluster without any inputs waits", with(applied(), func(i *Input) {
			i.Deleting, i.DurableInputs, i.InputsHash, i.InputsWait = true, false, "", captfv1.WaitingForOwnerReason
		}), Decision{Reason: captfv1.WaitingForOwnerReason, Wait: true, RequeueAfter: time.Minute}},
		{"failed destroy backs off", with(applied(), func(i *Input) {
			i.Deleting, i.LastChange, i.Failures = true, failed(30*time.Second), 1
		}), Decision{Reason: captfv1.DestroyFailedReason, Wait: true, RequeueAfter: 30 * time.Second}},
		{"failed destroy retries after the backoff", with(applied(), func(i *Input) {
			i.Deleting, i.LastChange, i.Failures = true, failed(90*time.Second), 1
		}), Decision{Op: captfv1.OperationDestroy, Reason: ReasonDestroy}},
		{"destroy waits for a slot", with(applied(), func(i *Input) { i.Deleting, i.Slots.Full = true, true }),
			Decision{Reason: captfv1.WaitingForJobSlotReason, Wait: true, RequeueAfter: 15 * time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Next(tc.in); got != tc.want {
				t.Errorf("Next() =\n  %+v\nwant\n  %+v", got, tc.want)
			}
		})
	}
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
