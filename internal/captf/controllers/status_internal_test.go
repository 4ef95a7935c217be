package controllers

import (
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// TestDriftCondition: what a drift check found comes from the newest check that succeeded; a
// failed check never reads as "found none".
func TestDriftCondition(t *testing.T) {
	drift := func(name string, res captfv1.RunResult, found string) batchv1.Job {
		j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{captfv1.OperationLabel: string(captfv1.OperationDrift)},
			Annotations: map[string]string{captfv1.BookkeptAnnotation: string(res)},
		}}
		if found != "" {
			j.Annotations[driftAnnotation] = found
		}
		return j
	}
	for _, tc := range []struct {
		name   string
		jobs   []batchv1.Job // newest first
		status metav1.ConditionStatus
		reason string
		msg    string
	}{
		{name: "never checked", status: metav1.ConditionUnknown, reason: captfv1.DriftNotCheckedReason, msg: "No drift check ran yet"},
		{name: "clean", jobs: []batchv1.Job{drift("d2", captfv1.RunSucceeded, "0")},
			status: metav1.ConditionFalse, reason: captfv1.NoDriftReason, msg: "Drift check d2 found none"},
		{name: "found", jobs: []batchv1.Job{drift("d2", captfv1.RunSucceeded, "2")},
			status: metav1.ConditionTrue, reason: captfv1.DriftReportedReason, msg: "Drift check d2 found 2 drifted resources"},
		{name: "failed after a finding", jobs: []batchv1.Job{drift("d3", captfv1.RunFailed, ""), drift("d2", captfv1.RunSucceeded, "1")},
			status: metav1.ConditionTrue, reason: captfv1.DriftReportedReason,
			msg: "Drift check d2 found 1 drifted resources; the newest check, Job d3, failed"},
		{name: "only failures", jobs: []batchv1.Job{drift("d1", captfv1.RunFailed, "")},
			status: metav1.ConditionUnknown, reason: captfv1.DriftNotCheckedReason,
			msg: "No drift check succeeded yet; the newest check, Job d1, failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := &pass[*captfv1.TerraformCluster]{jobList: tc.jobs, status: &captfv1.WorkspaceStatus{}}
			status, reason, msg, ok := driftCondition(p)
			g.Expect(ok).To(BeTrue())
			g.Expect([]string{string(status), reason, msg}).To(Equal([]string{string(tc.status), tc.reason, tc.msg}))
		})
	}
}
