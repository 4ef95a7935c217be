package controllers

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// TestStateSizeCondition: StateNearSecretLimit warns from 75% of the 1 MiB a state Secret holds.
func TestStateSizeCondition(t *testing.T) {
	for _, tc := range []struct {
		bytes  int64
		status metav1.ConditionStatus
		reason string
		msg    string
	}{
		{0, metav1.ConditionFalse, captfv1.StateSizeWithinLimitReason, "The state is 0.00 MiB compressed, 0% of the 1 MiB one state Secret holds"},
		{786431, metav1.ConditionFalse, captfv1.StateSizeWithinLimitReason, "The state is 0.75 MiB compressed, 74% of the 1 MiB one state Secret holds"},
		{786432, metav1.ConditionTrue, captfv1.StateNearSecretLimitReason, "The state is 0.75 MiB compressed, 75% of the 1 MiB one state Secret holds: "},
		{1 << 21, metav1.ConditionTrue, captfv1.StateNearSecretLimitReason, "The state is 2.00 MiB compressed, 200% of the 1 MiB one state Secret holds: "},
	} {
		g := NewWithT(t)
		s, reason, msg := stateSizeCondition(tc.bytes)
		g.Expect(s).To(Equal(tc.status), "%d bytes", tc.bytes)
		g.Expect(reason).To(Equal(tc.reason))
		g.Expect(msg).To(HavePrefix(tc.msg))
	}
}

// TestNotPersistedHoldOutlivesTheJob: the object's copy of a hold holds when its Job is gone,
// and only a newer state-writing run or the operator's captf.io/state-recovered lifts it.
func TestNotPersistedHoldOutlivesTheJob(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	job := func(name string, op captfv1.Operation, created time.Time, heldBytes string) batchv1.Job {
		j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created),
			Labels:      map[string]string{captfv1.OperationLabel: string(op)},
			Annotations: map[string]string{captfv1.BookkeptAnnotation: string(captfv1.RunFailed)}}}
		if heldBytes != "" {
			j.Annotations[captfv1.StateNotPersistedAnnotation] = heldBytes
			j.Annotations[erroredBackupAnnotation] = "captf-state-backup-x-c-3"
		}
		return j
	}
	heldJob := job("apply-a2", captfv1.OperationApply, at, "2000000")
	copyOf := map[string]string{captfv1.StateNotPersistedHoldAnnotation: encodeHold(&heldJob)}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for key, val := range m {
			out[key] = val
		}
		return out
	}
	older := job("apply-a1", captfv1.OperationApply, at.Add(-time.Hour), "")
	newerRestore := job("restore-r1", captfv1.OperationRestore, at.Add(time.Hour), "")
	newerPlan := job("plan-p1", captfv1.OperationPlan, at.Add(time.Hour), "")

	for _, tc := range []struct {
		name        string
		jobs        []batchv1.Job // newest first
		annotations map[string]string
		want        string // the held Job's name, "" for none
		reason      string
	}{
		{"the held Job itself", []batchv1.Job{heldJob, older}, nil, "apply-a2", captfv1.StateTooLargeReason},
		{"after a move: no Jobs, the copy holds", nil, copyOf, "apply-a2", captfv1.StateTooLargeReason},
		{"the held Job deleted, an older run left", []batchv1.Job{older}, copyOf, "apply-a2", captfv1.StateTooLargeReason},
		{"a plan after the hold writes no state", []batchv1.Job{newerPlan}, copyOf, "apply-a2", captfv1.StateTooLargeReason},
		{"recovered by the operator", nil, with(copyOf, captfv1.StateRecoveredAnnotation, "apply-a2"), "", ""},
		{"recovered names another Job", nil, with(copyOf, captfv1.StateRecoveredAnnotation, "apply-a1"), "apply-a2", captfv1.StateTooLargeReason},
		{"a restore after the hold replaced the state", []batchv1.Job{newerRestore, older}, copyOf, "", ""},
		{"an unreadable copy holds nothing", []batchv1.Job{older}, map[string]string{captfv1.StateNotPersistedHoldAnnotation: "{"}, "", ""},
		{"no hold at all", []batchv1.Job{older}, nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, j := notPersisted(tc.jobs, tc.annotations)
			got := ""
			if j != nil {
				got = j.Name
				if j.Annotations[erroredBackupAnnotation] != "captf-state-backup-x-c-3" {
					t.Errorf("the kept backup is lost: %v", j.Annotations)
				}
			}
			if got != tc.want || reason != tc.reason {
				t.Errorf("notPersisted = %q, %q; want %q, %q", reason, got, tc.reason, tc.want)
			}
		})
	}
}
