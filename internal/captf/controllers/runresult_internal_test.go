package controllers

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/runresult"
)

// TestRunResult: a held plan completes its Job (the runner exits 0) and is recorded Blocked, not
// Succeeded; so an apply Job that completed without a readable result is no success either: it
// may have held its plan, and recording a success would mark the state as carrying inputs it
// never got.
func TestRunResult(t *testing.T) {
	held := &runresult.Result{Error: &runresult.Error{Kind: runresult.KindBlocked, Step: "show"}}
	done := &runresult.Result{}
	failed := &runresult.Result{Error: &runresult.Error{Kind: runresult.KindStep, Step: "apply"}}
	gone := errors.New("the Job left no result")
	for _, tc := range []struct {
		name  string
		op    captfv1.Operation
		phase jobs.Phase
		o     jobs.Outcome
		want  captfv1.RunResult
	}{
		{"a held plan's Job completes: Blocked", captfv1.OperationApply, jobs.PhaseSucceeded, jobs.Outcome{Result: held}, captfv1.RunBlocked},
		{"a held plan of an older runner failed its Job: Blocked", captfv1.OperationApply, jobs.PhaseFailed, jobs.Outcome{Result: held}, captfv1.RunBlocked},
		{"an apply that completed", captfv1.OperationApply, jobs.PhaseSucceeded, jobs.Outcome{Result: done}, captfv1.RunSucceeded},
		{"an apply that completed without a result is no success", captfv1.OperationApply, jobs.PhaseSucceeded, jobs.Outcome{ResultErr: gone}, captfv1.RunFailed},
		{"a refresh that completed without a result", captfv1.OperationRefresh, jobs.PhaseSucceeded, jobs.Outcome{ResultErr: gone}, captfv1.RunSucceeded},
		{"a failed apply", captfv1.OperationApply, jobs.PhaseFailed, jobs.Outcome{Result: failed}, captfv1.RunFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(runResult(tc.op, tc.phase, tc.o)).To(Equal(tc.want))
		})
	}
}
