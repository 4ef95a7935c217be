package controllers

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/decide"
	"github.com/capx-io/capx/internal/captf/leases"
	"github.com/capx-io/capx/internal/captf/outputs"
	"github.com/capx-io/capx/internal/captf/state"
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

// job is a recorded Job of op with result (unrecorded for "").
func job(name string, op captfv1.Operation, res captfv1.RunResult) batchv1.Job {
	j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{captfv1.OperationLabel: string(op)}, Annotations: map[string]string{}}}
	if res != "" {
		j.Annotations[captfv1.BookkeptAnnotation] = string(res)
	}
	return j
}

// statusPass is a cluster pass with nothing recorded.
func statusPass(f func(p *pass[*captfv1.TerraformCluster])) *pass[*captfv1.TerraformCluster] {
	tc := &captfv1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	p := &pass[*captfv1.TerraformCluster]{scope: &reconcileScope[*captfv1.TerraformCluster]{Object: tc},
		status: &tc.Status.WorkspaceStatus, init: &tc.Status.Initialization}
	if f != nil {
		f(p)
	}
	return p
}

type conditionCase struct {
	name   string
	pass   *pass[*captfv1.TerraformCluster]
	status metav1.ConditionStatus
	reason string
	msg    string
}

func checkConditions(t *testing.T, cases []conditionCase, cond func(p *pass[*captfv1.TerraformCluster]) (metav1.ConditionStatus, string, string)) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s, reason, msg := cond(tc.pass)
			g.Expect([]string{string(s), reason, msg}).To(Equal([]string{string(tc.status), tc.reason, tc.msg}))
		})
	}
}

// TestApplyCondition: ApplyJobSucceeded from what the pass recorded: a Job started or running,
// why a due operation's Job did not start, what the decision waits for, else the newest apply.
func TestApplyCondition(t *testing.T) {
	pending := func(reason string, f func(p *pass[*captfv1.TerraformCluster])) *pass[*captfv1.TerraformCluster] {
		return statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.decision = decide.Decision{Reason: reason, Wait: true, Pending: captfv1.OperationApply}
			if f != nil {
				f(p)
			}
		})
	}
	quota := apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "j", errors.New("exceeded quota: no-jobs"))
	failedApply := job("c-apply-1", captfv1.OperationApply, captfv1.RunFailed)
	checkConditions(t, []conditionCase{
		{"a Job started in this pass", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.decision = decide.Decision{Op: captfv1.OperationApply}
			p.started = &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "c-apply-1"}}
		}), metav1.ConditionUnknown, captfv1.ApplyRunningReason, "Started apply Job c-apply-1"},
		{"a Job runs", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			j := job("c-plan-1", captfv1.OperationPlan, "")
			p.active = &j
		}), metav1.ConditionUnknown, captfv1.ApplyRunningReason, "plan Job c-plan-1 is running"},
		// A pool's Ready counts this condition, and a pool refreshes every minute (issue 25).
		{"a refresh or drift check applies nothing: the newest apply's result stays", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			j := job("c-drift-1", captfv1.OperationDrift, "")
			p.active = &j
			p.jobList = []batchv1.Job{j, job("c-apply-1", captfv1.OperationApply, captfv1.RunSucceeded)}
		}), metav1.ConditionTrue, captfv1.ApplySucceededReason, "Job c-apply-1"},
		{"an invalid Job policy says what is wrong", pending(captfv1.JobPolicyInvalidReason, func(p *pass[*captfv1.TerraformCluster]) {
			p.policyErr = errors.New("jobs: activeDeadlineSeconds must be positive")
		}), metav1.ConditionFalse, captfv1.JobPolicyInvalidReason, "jobs: activeDeadlineSeconds must be positive"},
		{"so does a ServiceAccount that may not run Jobs", pending(captfv1.JobPolicyInvalidReason, func(p *pass[*captfv1.TerraformCluster]) {
			p.accountInvalid = "the Job's ServiceAccount x does not exist"
		}), metav1.ConditionFalse, captfv1.JobPolicyInvalidReason, "the Job's ServiceAccount x does not exist"},
		{"a quota refusal names the quota", pending(captfv1.QuotaExceededReason, func(p *pass[*captfv1.TerraformCluster]) {
			p.lastRefusal = &refusal{reason: captfv1.QuotaExceededReason, err: quota}
		}), metav1.ConditionFalse, captfv1.QuotaExceededReason, "A ResourceQuota refused the Job: " + quota.Error()},
		{"missing credentials wait, saying which", pending(captfv1.CredentialsNotFoundReason, func(p *pass[*captfv1.TerraformCluster]) {
			p.inputsErr = errors.New("the credentials Secret ns/creds does not exist")
		}), metav1.ConditionUnknown, captfv1.CredentialsNotFoundReason, "the credentials Secret ns/creds does not exist"},
		{"a lease wait names the holder", pending(captfv1.WaitingForRunLeaseReason, func(p *pass[*captfv1.TerraformCluster]) {
			p.leaseWait = &leases.Wait{Reason: captfv1.WaitingForRunLeaseReason, Message: "Waiting for Job j1, which holds Lease l, to finish"}
		}), metav1.ConditionUnknown, captfv1.WaitingForRunLeaseReason, "Waiting for Job j1, which holds Lease l, to finish"},
		{"a wait without a message says what waits", pending(captfv1.WaitingForMachineOperationsReason, nil),
			metav1.ConditionUnknown, captfv1.WaitingForMachineOperationsReason, "Waiting before starting apply"},
		{"inputs too large cannot be applied", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.inputsWait, p.inputsErr = captfv1.InputsTooLargeReason, errors.New("the inputs are 2 MiB")
		}), metav1.ConditionFalse, captfv1.InputsTooLargeReason, "the inputs are 2 MiB"},
		{"a lost state holds, saying how to recover", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.decision = decide.Decision{Reason: captfv1.StateLostReason, Wait: true}
		}), metav1.ConditionFalse, captfv1.StateLostReason, stateLostMessage},
		{"a destructive plan waits for its approval", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.decision = decide.Decision{Reason: captfv1.DestructivePlanBlockedReason, Wait: true}
		}), metav1.ConditionFalse, captfv1.DestructivePlanBlockedReason, "The plan deletes or replaces resources and waits for an approved TerraformPlan"},
		{"the Job cap", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.decision = decide.Decision{Reason: captfv1.WaitingForJobSlotReason, Wait: true}
		}), metav1.ConditionUnknown, captfv1.WaitingForJobSlotReason, "The cap on active Jobs is reached"},
		{"Jobs that could not be counted", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.decision = decide.Decision{Reason: captfv1.WaitingForJobSlotReason, Wait: true}
			p.slotsErr = errors.New("count active Jobs: timeout")
		}), metav1.ConditionUnknown, captfv1.WaitingForJobSlotReason, "The active Jobs could not be counted, so no Job starts until they are: count active Jobs: timeout"},
		{"the newest apply succeeded", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.jobList = []batchv1.Job{job("c-apply-2", captfv1.OperationApply, captfv1.RunSucceeded), failedApply}
		}), metav1.ConditionTrue, captfv1.ApplySucceededReason, "Job c-apply-2"},
		{"the newest apply failed and retries", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.jobList = []batchv1.Job{failedApply}
			p.status.LastRun = &captfv1.RunSummary{Job: "c-apply-1", Error: &captfv1.RunError{Summary: "boom"}}
			p.decision = decide.Decision{Reason: captfv1.ApplyFailedReason, Wait: true, RequeueAfter: 40 * time.Second}
		}), metav1.ConditionFalse, captfv1.ApplyFailedReason, "Job c-apply-1 failed: boom (retrying in 40s)"},
		{"a Job past its deadline", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.jobList = []batchv1.Job{failedApply}
			p.status.LastRun = &captfv1.RunSummary{Job: "c-apply-1", Error: &captfv1.RunError{Kind: "deadline", Summary: "stopped"}}
		}), metav1.ConditionFalse, captfv1.JobDeadlineExceededReason, "Job c-apply-1 failed: stopped"},
		// Issue 25: the pass after the one that recorded a failure may read the object from a
		// cache that has not seen its new status.lastRun yet; the Job carries its own error.
		{"the error is the Job's own, whatever status.lastRun says", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			failed := job("c-apply-2", captfv1.OperationApply, captfv1.RunFailed)
			failed.Annotations[errorKindAnnotation], failed.Annotations[errorAnnotation] = "step", "Error: Invalid value for variable"
			p.jobList = []batchv1.Job{failed, failedApply}
			p.status.LastRun = &captfv1.RunSummary{Job: "c-apply-1", Error: &captfv1.RunError{Summary: "boom"}}
		}), metav1.ConditionFalse, captfv1.ApplyFailedReason, "Job c-apply-2 failed: Error: Invalid value for variable"},
		{"a failed plan of the current inputs is the change's failure (Manual)", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			failed := job("c-plan-1", captfv1.OperationPlan, captfv1.RunFailed)
			failed.Annotations[captfv1.InputsHashAnnotation] = "h2:b"
			failed.Annotations[errorKindAnnotation], failed.Annotations[errorAnnotation] = "step", "Error: nope"
			p.input.InputsHash = "h2:b"
			p.jobList = []batchv1.Job{failed, job("c-apply-1", captfv1.OperationApply, captfv1.RunSucceeded)}
		}), metav1.ConditionFalse, captfv1.ApplyFailedReason, "Job c-plan-1 failed: Error: nope"},
		{"a destroy succeeded", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.jobList = []batchv1.Job{job("c-destroy-1", captfv1.OperationDestroy, captfv1.RunSucceeded)}
		}), metav1.ConditionTrue, captfv1.DestroySucceededReason, "Job c-destroy-1"},
		{"the state records an apply whose Job is gone", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.snap = &state.Snapshot{InputsHash: "h2:a"}
		}), metav1.ConditionTrue, captfv1.ApplySucceededReason, "The state records a successful apply"},
		{"nothing applied yet", statusPass(nil), metav1.ConditionUnknown, captfv1.NoApplyYetReason, "No apply has run yet"},
	}, applyCondition[*captfv1.TerraformCluster])
}

// TestRestoreCondition: RestoreJobSucceeded only while a restore is requested.
func TestRestoreCondition(t *testing.T) {
	requested := func(f func(p *pass[*captfv1.TerraformCluster])) *pass[*captfv1.TerraformCluster] {
		return statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.scope.Object.Annotations = map[string]string{captfv1.RestoreStateAnnotation: "4"}
			if f != nil {
				f(p)
			}
		})
	}
	restoreJob := func(res captfv1.RunResult) []batchv1.Job {
		j := job("c-restore-1", captfv1.OperationRestore, res)
		j.Annotations[captfv1.RestoreSerialAnnotation] = "4"
		return []batchv1.Job{j}
	}
	g := NewWithT(t)
	_, _, _, ok := restoreCondition(statusPass(nil))
	g.Expect(ok).To(BeFalse(), "no request, no condition")
	checkConditions(t, []conditionCase{
		{"a backup that fails its checks is not pushed", requested(func(p *pass[*captfv1.TerraformCluster]) {
			p.decision = decide.Decision{Reason: captfv1.RestoreBackupInvalidReason, Wait: true, Pending: captfv1.OperationRestore}
			p.backupErr = errors.New("state: backup serial 4: digest mismatch")
		}), metav1.ConditionFalse, captfv1.RestoreBackupInvalidReason,
			"state: backup serial 4: digest mismatch; nothing was restored: remove the annotation, or name another serial"},
		{"a serial without a backup", requested(func(p *pass[*captfv1.TerraformCluster]) {
			p.decision = decide.Decision{Reason: captfv1.RestoreBackupNotFoundReason, Wait: true}
		}), metav1.ConditionFalse, captfv1.RestoreBackupNotFoundReason, "No complete backup of serial 4 exists; see status.stateBackups"},
		{"restored", requested(func(p *pass[*captfv1.TerraformCluster]) { p.jobList = restoreJob(captfv1.RunSucceeded) }),
			metav1.ConditionTrue, captfv1.StateRestoredReason, "Serial 4 restored by Job c-restore-1"},
		{"restoring", requested(func(p *pass[*captfv1.TerraformCluster]) { p.jobList = restoreJob("") }),
			metav1.ConditionUnknown, captfv1.ApplyRunningReason, "Restore Job c-restore-1 is running"},
		{"a failed restore is not retried", requested(func(p *pass[*captfv1.TerraformCluster]) { p.jobList = restoreJob(captfv1.RunFailed) }),
			metav1.ConditionFalse, captfv1.RestoreFailedReason,
			"Restore Job c-restore-1 failed; it is not retried for the same serial: remove the annotation and set it again"},
		{"requested", requested(nil), metav1.ConditionUnknown, captfv1.NoApplyYetReason, "Restore of serial 4 requested"},
	}, func(p *pass[*captfv1.TerraformCluster]) (metav1.ConditionStatus, string, string) {
		s, reason, msg, _ := restoreCondition(p)
		return s, reason, msg
	})
}

// TestStateCondition: StateReadable from the snapshot and the read's error.
func TestStateCondition(t *testing.T) {
	g := NewWithT(t)
	_, _, _, ok := stateCondition(statusPass(nil))
	g.Expect(ok).To(BeFalse(), "not read (a Job runs): no condition")
	checkConditions(t, []conditionCase{
		{"read", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.snap = &state.Snapshot{Serial: 3, Resources: 2, Bytes: 900}
		}), metav1.ConditionTrue, captfv1.StateReadReason, "Serial 3, 2 resources, 900 bytes"},
		{"locked by a stranger", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.snap, p.lockForeign, p.stateErr = &state.Snapshot{}, true, &lockedError{who: "someone"}
		}), metav1.ConditionFalse, captfv1.StateLockedReason, (&lockedError{who: "someone"}).Error()},
		{"no state yet", statusPass(func(p *pass[*captfv1.TerraformCluster]) { p.stateErr = state.ErrNotFound }),
			metav1.ConditionUnknown, captfv1.StateNotFoundReason, "No state yet: nothing was applied"},
		{"a lost state", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.stateErr = state.ErrNotFound
			p.decision = decide.Decision{Reason: captfv1.StateLostReason}
		}), metav1.ConditionFalse, captfv1.StateNotFoundReason, stateLostMessage},
		{"retained by an earlier object", statusPass(func(p *pass[*captfv1.TerraformCluster]) { p.stateErr = &retainedError{uid: "u1"} }),
			metav1.ConditionFalse, captfv1.RetainedStateFoundReason, (&retainedError{uid: "u1"}).Error()},
	}, func(p *pass[*captfv1.TerraformCluster]) (metav1.ConditionStatus, string, string) {
		s, reason, msg, _ := stateCondition(p)
		return s, reason, msg
	})
}

// TestHealthCondition: InfrastructureHealthy from the module's health output.
func TestHealthCondition(t *testing.T) {
	for _, tc := range []struct {
		health *captfv1.Health
		status metav1.ConditionStatus
		reason string
	}{
		{nil, metav1.ConditionUnknown, captfv1.HealthUnknownReason},
		{&captfv1.Health{State: "running", Healthy: true}, metav1.ConditionTrue, captfv1.HealthyReason},
		{&captfv1.Health{State: "running"}, metav1.ConditionFalse, captfv1.InstanceUnhealthyReason},
		{&captfv1.Health{State: "pending"}, metav1.ConditionFalse, captfv1.InstancePendingReason},
		{&captfv1.Health{State: "degraded"}, metav1.ConditionFalse, captfv1.InstanceDegradedReason},
		{&captfv1.Health{State: "stopped"}, metav1.ConditionFalse, captfv1.InstanceStoppedReason},
		{&captfv1.Health{State: "terminated"}, metav1.ConditionFalse, captfv1.InstanceTerminatedReason},
		{&captfv1.Health{State: "rebooting"}, metav1.ConditionUnknown, captfv1.HealthUnknownReason},
	} {
		s, reason, _ := healthCondition(tc.health)
		if s != tc.status || reason != tc.reason {
			t.Errorf("healthCondition(%+v) = %s/%s, want %s/%s", tc.health, s, reason, tc.status, tc.reason)
		}
	}
}

// TestOutputsCondition: what the module reported differently from what the object latched is
// reported, never written.
func TestOutputsCondition(t *testing.T) {
	checkConditions(t, []conditionCase{
		{"a changed provider ID", statusPass(func(p *pass[*captfv1.TerraformCluster]) { p.providerIDChanged = true }),
			metav1.ConditionFalse, captfv1.ProviderIDChangedReason,
			"The module reported a different provider_id than the one latched in spec.providerID; the machine keeps the first"},
		{"a changed endpoint", statusPass(func(p *pass[*captfv1.TerraformCluster]) { p.endpointChanged = "moved" }),
			metav1.ConditionFalse, captfv1.ControlPlaneEndpointChangedReason, "moved"},
		{"no outputs read", statusPass(nil), metav1.ConditionUnknown, captfv1.OutputsPendingReason, ""},
		{"valid", statusPass(func(p *pass[*captfv1.TerraformCluster]) { p.outputs = &outputs.Result{} }),
			metav1.ConditionTrue, captfv1.OutputsValidReason, ""},
		{"a required output still null", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.outputs = &outputs.Result{Problems: []outputs.Problem{{Output: "provider_id", Status: outputs.Pending, Message: "provider_id is null"}}}
		}), metav1.ConditionUnknown, captfv1.OutputsPendingReason, "provider_id is null"},
		{"an output of the wrong shape, worst first", statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.outputs = &outputs.Result{Problems: []outputs.Problem{
				{Output: "provider_id", Status: outputs.Pending, Message: "provider_id is null"},
				{Output: "addresses", Status: outputs.Invalid, Message: "addresses must be a list"},
			}}
		}), metav1.ConditionFalse, captfv1.OutputsInvalidReason, "addresses must be a list"},
	}, outputsCondition[*captfv1.TerraformCluster])
}

// TestClusterStatus: a deleting cluster says which machines and pools it waits for; the
// endpoint condition follows spec.controlPlaneEndpoint.
func TestClusterStatus(t *testing.T) {
	g := NewWithT(t)
	p := statusPass(func(p *pass[*captfv1.TerraformCluster]) { p.dependents = []string{"TerraformMachine/m1"} })
	setClusterStatus(p)
	tc := p.scope.Object
	blocked := conditions.Get(tc, captfv1.DeletionBlockedCondition)
	g.Expect([]string{string(blocked.Status), blocked.Reason, blocked.Message}).To(Equal([]string{
		string(metav1.ConditionTrue), captfv1.DependentsExistReason, "Waiting for TerraformMachine/m1 to be destroyed first"}))
	g.Expect(conditions.Get(tc, clusterv1.DeletingCondition).Message).To(Equal("Waiting for TerraformMachine/m1 to be destroyed first"))
	g.Expect(conditions.Get(tc, captfv1.EndpointAvailableCondition).Reason).To(Equal(captfv1.WaitingForEndpointReason))

	p = statusPass(func(p *pass[*captfv1.TerraformCluster]) {
		p.scope.Object.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443}
	})
	setClusterStatus(p)
	g.Expect(conditions.Get(p.scope.Object, captfv1.DeletionBlockedCondition).Status).To(Equal(metav1.ConditionFalse))
	g.Expect(conditions.Get(p.scope.Object, captfv1.EndpointAvailableCondition).Message).To(Equal("10.0.0.1:6443"))
}

// TestReadyCountsAppliesOnlyForPools: once provisioned, a failed re-apply leaves a cluster
// Ready (health decides) and makes a pool un-ready.
func TestReadyCountsAppliesOnlyForPools(t *testing.T) {
	for _, tc := range []struct {
		countApplies bool
		ready        metav1.ConditionStatus
	}{{false, metav1.ConditionTrue}, {true, metav1.ConditionFalse}} {
		p := statusPass(func(p *pass[*captfv1.TerraformCluster]) { p.init.Provisioned = ptr.To(true) })
		obj := p.scope.Object
		for _, c := range []metav1.Condition{
			{Type: captfv1.InfrastructureHealthyCondition, Status: metav1.ConditionTrue, Reason: captfv1.HealthyReason},
			{Type: clusterv1.DeletingCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotDeletingReason},
			{Type: captfv1.ApplyJobSucceededCondition, Status: metav1.ConditionFalse, Reason: captfv1.ApplyFailedReason},
		} {
			conditions.Set(obj, c)
		}
		setReady(p, tc.countApplies)
		if got := conditions.Get(obj, captfv1.ReadyCondition).Status; got != tc.ready {
			t.Errorf("countApplies=%v: Ready=%s, want %s", tc.countApplies, got, tc.ready)
		}
	}
}

// TestDeletingCondition: a deleting object says whether it destroys (a destroy started, running
// or due and waiting for its Job's start) or what holds it.
func TestDeletingCondition(t *testing.T) {
	deleting := func(f func(p *pass[*captfv1.TerraformCluster])) *pass[*captfv1.TerraformCluster] {
		return statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.scope.Object.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			f(p)
		})
	}
	for _, tc := range []struct {
		name string
		pass *pass[*captfv1.TerraformCluster]
		msg  string
	}{
		{"a destroy starts", deleting(func(p *pass[*captfv1.TerraformCluster]) {
			p.decision = decide.Decision{Op: captfv1.OperationDestroy}
		}), "Destroying the infrastructure"},
		{"a destroy waits for its Job's start", deleting(func(p *pass[*captfv1.TerraformCluster]) {
			p.decision = decide.Decision{Reason: captfv1.CredentialsNotFoundReason, Wait: true, Pending: captfv1.OperationDestroy}
		}), "Destroying the infrastructure"},
		{"a destroy runs", deleting(func(p *pass[*captfv1.TerraformCluster]) {
			j := job("c-destroy-1", captfv1.OperationDestroy, "")
			p.active = &j
			p.decision = decide.Decision{Reason: decide.ReasonJobRunning, Wait: true}
		}), "Destroying the infrastructure"},
		{"a lost state holds the deletion", deleting(func(p *pass[*captfv1.TerraformCluster]) {
			p.decision = decide.Decision{Reason: captfv1.StateLostReason, Wait: true}
		}), "Held: " + stateLostMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			updateStatus(tc.pass, clusterKind{})
			c := conditions.Get(tc.pass.scope.Object, clusterv1.DeletingCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect([]string{string(c.Status), c.Reason, c.Message}).To(Equal([]string{string(metav1.ConditionTrue), clusterv1.DeletingReason, tc.msg}))
		})
	}
}

// TestReadySaysWhatHoldsTheObject (issue 25): an object frozen until an operator acts (a plan
// waiting for approval, a lost or unreadable state, ...) keeps its Ready status (after
// provisioning, its health: the infrastructure works), and Ready's message says what holds it.
// CAPI mirrors that condition, message included, into InfrastructureReady, and clusterctl
// describe shows it.
func TestReadySaysWhatHoldsTheObject(t *testing.T) {
	healthy := func(f func(p *pass[*captfv1.TerraformCluster])) *pass[*captfv1.TerraformCluster] {
		return statusPass(func(p *pass[*captfv1.TerraformCluster]) {
			p.init.Provisioned = ptr.To(true)
			p.snap = &state.Snapshot{Serial: 4, InputsHash: "h2:a", Resources: 3}
			p.status.Health = &captfv1.Health{State: "running", Healthy: true}
			// As earlier passes left them: a pass that cannot read the state keeps them.
			for _, typ := range []string{captfv1.InfrastructureHealthyCondition, captfv1.OutputsValidCondition} {
				conditions.Set(p.scope.Object, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "AsBefore"})
			}
			f(p)
		})
	}
	for _, tc := range []struct {
		name string
		pass *pass[*captfv1.TerraformCluster]
		msg  string
	}{
		{"nothing holds it: no message", healthy(func(p *pass[*captfv1.TerraformCluster]) {
			p.decision = decide.Decision{Reason: decide.ReasonUpToDate}
		}), ""},
		{"a held destructive plan", healthy(func(p *pass[*captfv1.TerraformCluster]) {
			p.decision = decide.Decision{Reason: captfv1.DestructivePlanBlockedReason, Wait: true}
		}), "* Changes are held (DestructivePlanBlocked): The plan deletes or replaces resources and waits for an approved TerraformPlan"},
		{"a plan awaiting approval", healthy(func(p *pass[*captfv1.TerraformCluster]) {
			p.decision = decide.Decision{Reason: captfv1.PlanAwaitingApprovalReason, Wait: true}
		}), "* Changes are held (PlanAwaitingApproval): A plan waits for approval"},
		{"a lost state", healthy(func(p *pass[*captfv1.TerraformCluster]) {
			p.snap = nil
			p.stateErr = state.ErrNotFound
			p.decision = decide.Decision{Reason: captfv1.StateLostReason, Wait: true}
		}), "* Changes are held (StateLost): " + stateLostMessage},
		{"an unreadable state", healthy(func(p *pass[*captfv1.TerraformCluster]) {
			p.snap = nil
			p.stateErr = &lockedError{who: "someone@elsewhere"}
			p.input.State.Unreadable = captfv1.StateLockedReason
			p.decision = decide.Decision{Reason: captfv1.StateLockedReason, Wait: true}
		}), "* Changes are held (StateLocked): " + (&lockedError{who: "someone@elsewhere"}).Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			updateStatus(tc.pass, clusterKind{})
			ready := conditions.Get(tc.pass.scope.Object, captfv1.ReadyCondition)
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "a frozen object's infrastructure still works")
			g.Expect(ready.Message).To(Equal(tc.msg))
		})
	}
}
