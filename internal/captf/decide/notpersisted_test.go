package decide

import (
	"testing"
	"time"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// TestNotPersistedHolds: after a run that could not save its state, nothing runs again (an
// apply would create the same resources a second time), also past any backoff, with new inputs,
// drift or an approved plan, and while deleting; only a restore or Retain may still go.
func TestNotPersistedHolds(t *testing.T) {
	hold := Decision{Reason: captfv1.StateTooLargeReason, Wait: true, RequeueAfter: time.Minute}
	held := func(in Input) Input { in.NotPersisted = captfv1.StateTooLargeReason; return in }
	failedLongAgo := &Run{Result: captfv1.RunFailed, FinishedAt: t0.Add(-time.Hour)}
	cases := []struct {
		name string
		in   Input
		want Decision
	}{
		{"first apply's state not saved", held(with(fresh(), func(i *Input) {
			i.State = State{Present: true}
			i.LastChange, i.Failures = failedLongAgo, 1
		})), hold},
		{"backoff over and inputs changed", held(with(applied(), func(i *Input) {
			i.InputsHash = "h2:b"
			i.LastChange, i.Failures = failedLongAgo, 1
		})), hold},
		{"approved plan", held(with(applied(), func(i *Input) {
			i.InputsHash = "h2:b"
			i.Plan = &Plan{Name: "p", PlanHash: "p2:x", Approved: true}
		})), hold},
		{"drift due", held(with(applied(), func(i *Input) { i.DriftInterval = time.Second })), hold},
		{"not persisted, not too large", with(applied(), func(i *Input) {
			i.InputsHash, i.NotPersisted = "h2:b", captfv1.StateNotPersistedReason
		}), Decision{Reason: captfv1.StateNotPersistedReason, Wait: true, RequeueAfter: time.Minute}},
		{"deleting holds the destroy", held(with(applied(), func(i *Input) { i.Deleting = true })), hold},
		{"deleting with Retain lets go", held(with(applied(), func(i *Input) {
			i.Deleting, i.DeletionPolicy = true, captfv1.DeletionPolicyRetain
		})), Decision{Reason: ReasonRetain, Retain: true}},
		{"a restore still runs", held(with(applied(), func(i *Input) { i.Restore = &Restore{Serial: 4, BackupFound: true} })),
			Decision{Op: captfv1.OperationRestore, Reason: ReasonRestoreRequested}},
		{"recovered: the retry runs", with(applied(), func(i *Input) {
			i.InputsHash = "h2:b"
			i.LastChange, i.Failures = failedLongAgo, 1
		}), Decision{Op: captfv1.OperationApply, Reason: ReasonRetry}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Next(tc.in); got != tc.want {
				t.Errorf("Next() = %+v, want %+v", got, tc.want)
			}
		})
	}
}
