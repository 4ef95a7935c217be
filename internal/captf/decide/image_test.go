package decide

import (
	"testing"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// TestNewModuleVersion (issue 25): spec.source.image is the module's version. A cluster or pool
// whose image differs from the one that applied its state applies again (guarded like any
// change, planned first under Manual), although its inputs are the same; a machine is applied
// once; a state that records no image (applied before the record existed) is left alone.
func TestNewModuleVersion(t *testing.T) {
	rollout := Decision{Op: captfv1.OperationApply, Reason: ReasonImageChanged}
	v1 := func(i *Input) { i.State.Image, i.Image = "m:v1", "m:v1" }
	v2 := func(i *Input) { i.State.Image, i.Image = "m:v1", "m:v2" }
	check(t, Next, []rule{
		{"the applied version: nothing runs", with(applied(), v1), Decision{Reason: ReasonUpToDate}},
		{"a new version rolls out", with(applied(), v2), rollout},
		{"under Manual it is planned first", with(applied(), func(i *Input) { v2(i); i.ApplyPolicy = captfv1.ApplyPolicyManual }),
			Decision{Op: captfv1.OperationPlan, Reason: ReasonImageChanged}},
		{"a failed rollout backs off", with(applied(), func(i *Input) { v2(i); i.LastChange, i.Failures = failed(0), 1 }),
			Decision{Reason: captfv1.ApplyFailedReason, Wait: true, RequeueAfter: 60e9}},
		{"a machine is applied once", with(applied(), func(i *Input) { v2(i); i.Mutable = false }), Decision{Reason: ReasonUpToDate}},
		{"a state without a recorded version is left alone", with(applied(), func(i *Input) { i.Image = "m:v2" }), Decision{Reason: ReasonUpToDate}},
		{"changed inputs say so first", with(applied(), func(i *Input) { v2(i); changed(i) }), applyNow},
	})
}
