package controllers

import (
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/captf/decide"
	"github.com/capx-io/capx/internal/captf/outputs"
)

// ownedConditions are the conditions the CAPTF controllers set, besides Ready, Paused and
// Deleting (which the shared plumbing owns).
var ownedConditions = []string{
	captfv1.DependenciesReadyCondition, captfv1.ApplyJobSucceededCondition, captfv1.StateReadableCondition,
	captfv1.OutputsValidCondition, captfv1.InfrastructureHealthyCondition, captfv1.DriftDetectedCondition,
	captfv1.RestoreJobSucceededCondition, captfv1.DeletionBlockedCondition, captfv1.EndpointAvailableCondition,
	captfv1.AutoscalingActiveCondition, captfv1.StateNearSecretLimitCondition, captfv1.ClusterExportsCurrentCondition,
	captfv1.OffsiteBackupsCurrentCondition,
}

// updateStatus computes every condition from what the pass observed, then the kind's own
// status and the Ready summary. It makes no API calls. Waiting is Unknown, never False, so a
// plan awaiting approval or a lease wait never makes an object un-ready.
func updateStatus[T capi.Object](p *pass[T], k kind[T]) {
	obj := p.scope.Object
	gen := obj.GetGeneration()
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		conditions.Set(obj, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	p.status.ObservedGeneration = gen
	if p.rendered != nil && p.snap != nil && p.snap.InputsHash != "" {
		p.status.AppliedInputsHash = p.snap.InputsHash
	}

	if t, s, reason, msg, ok := dependenciesCondition(p); ok {
		set(t, s, reason, msg)
	}
	if s, reason, msg, ok := stateCondition(p); ok {
		set(captfv1.StateReadableCondition, s, reason, msg)
	}
	s, reason, msg := applyCondition(p)
	set(captfv1.ApplyJobSucceededCondition, s, reason, msg)
	if p.outputs != nil || p.snap != nil {
		s, reason, msg = outputsCondition(p)
		set(captfv1.OutputsValidCondition, s, reason, msg)
		s, reason, msg = healthCondition(p.status.Health)
		set(captfv1.InfrastructureHealthyCondition, s, reason, msg)
	} else if conditions.Get(obj, captfv1.OutputsValidCondition) == nil {
		set(captfv1.OutputsValidCondition, metav1.ConditionUnknown, captfv1.OutputsPendingReason, "No state yet")
		set(captfv1.InfrastructureHealthyCondition, metav1.ConditionUnknown, captfv1.HealthUnknownReason, "No state yet")
	}
	if s, reason, msg, ok := driftCondition(p); ok {
		set(captfv1.DriftDetectedCondition, s, reason, msg)
	}
	if s, reason, msg, ok := restoreCondition(p); ok {
		set(captfv1.RestoreJobSucceededCondition, s, reason, msg)
	}
	setStateSize(p, set)
	if s, reason, msg, ok := offsiteCondition(p.offsite); ok {
		set(captfv1.OffsiteBackupsCurrentCondition, s, reason, msg)
	}
	switch {
	case p.decision.Op == captfv1.OperationDestroy || p.decision.Pending == captfv1.OperationDestroy ||
		(p.active != nil && p.active.Labels[captfv1.OperationLabel] == string(captfv1.OperationDestroy)):
		set(clusterv1.DeletingCondition, metav1.ConditionTrue, clusterv1.DeletingReason, "Destroying the infrastructure")
	case obj.GetDeletionTimestamp().IsZero():
	case p.decision.Reason == captfv1.StateLostReason:
		set(clusterv1.DeletingCondition, metav1.ConditionTrue, clusterv1.DeletingReason, "Held: "+stateLostMessage)
	case p.decision.Reason == captfv1.DurableInputsMissingReason:
		set(clusterv1.DeletingCondition, metav1.ConditionTrue, clusterv1.DeletingReason, "Held: "+durableInputsMissingMessage)
	case p.decision.Reason == captfv1.StateTooLargeReason, p.decision.Reason == captfv1.StateNotPersistedReason:
		set(clusterv1.DeletingCondition, metav1.ConditionTrue, clusterv1.DeletingReason, "Held: "+notPersistedMessage(p))
	case p.decision.Reason == decide.ReasonNamespaceTerminating:
		set(clusterv1.DeletingCondition, metav1.ConditionTrue, clusterv1.DeletingReason, "Held: "+p.nsMessage)
	case p.decision.Reason == decide.ReasonDestroyingElsewhere:
		set(clusterv1.DeletingCondition, metav1.ConditionTrue, clusterv1.DeletingReason, p.nsMessage)
	}
	k.setStatus(p)
	setReady(p, k.readyCountsApplies())
	noteHold(p)
}

// noteHold puts what freezes the object (heldBy) into the message of its Ready condition, whose
// status stays what the infrastructure is (after provisioning, its health: a frozen object's
// infrastructure still works). CAPI mirrors that condition, message included, into the Cluster's,
// Machine's or MachinePool's InfrastructureReady, and clusterctl describe shows its message: an
// operator looking at CAPI sees that no change applies until someone acts.
func noteHold[T capi.Object](p *pass[T]) {
	note := heldBy(p)
	ready := conditions.Get(p.scope.Object, captfv1.ReadyCondition)
	if note == "" || ready == nil || strings.Contains(ready.Message, note) {
		return
	}
	if ready.Message != "" {
		note = ready.Message + "\n" + note
	}
	ready.Message = note
	conditions.Set(p.scope.Object, *ready)
}

// heldBy says what holds every change of the object until an operator acts ("" when nothing
// does): a state that could not be saved or is gone or unreadable, a plan waiting for approval,
// approvals not enforced, a machine's durable inputs gone. Each is the message of the condition
// that reports it, with its reason.
func heldBy[T capi.Object](p *pass[T]) string {
	obj, reason := p.scope.Object, p.decision.Reason
	cond := captfv1.ApplyJobSucceededCondition
	switch reason {
	case captfv1.StateTooLargeReason, captfv1.StateNotPersistedReason, captfv1.StateLostReason,
		captfv1.DestructivePlanBlockedReason, captfv1.PlanAwaitingApprovalReason, captfv1.PlanChangedReason,
		captfv1.ApprovalsNotEnforcedReason, captfv1.DurableInputsMissingReason:
	case p.input.State.Unreadable:
		if reason == "" {
			return ""
		}
		cond = captfv1.StateReadableCondition
	default:
		return ""
	}
	c := conditions.Get(obj, cond)
	if c == nil || c.Reason != reason {
		return ""
	}
	return "* Changes are held (" + reason + "): " + c.Message
}

// setClusterStatus sets what only a TerraformCluster reports: whether its deletion waits for
// its machines and pools, and its endpoint.
func setClusterStatus(p *pass[*captfv1.TerraformCluster]) {
	tc := p.scope.Object
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		conditions.Set(tc, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: tc.Generation})
	}
	if len(p.dependents) > 0 {
		msg := "Waiting for " + listSome(p.dependents, 5) + " to be destroyed first"
		set(captfv1.DeletionBlockedCondition, metav1.ConditionTrue, captfv1.DependentsExistReason, msg)
		set(clusterv1.DeletingCondition, metav1.ConditionTrue, clusterv1.DeletingReason, msg)
	} else {
		set(captfv1.DeletionBlockedCondition, metav1.ConditionFalse, captfv1.NotBlockedReason, "")
	}
	if tc.Spec.ControlPlaneEndpoint.IsValid() {
		set(captfv1.EndpointAvailableCondition, metav1.ConditionTrue, captfv1.EndpointAvailableReason,
			fmt.Sprintf("%s:%d", tc.Spec.ControlPlaneEndpoint.Host, tc.Spec.ControlPlaneEndpoint.Port))
	} else {
		set(captfv1.EndpointAvailableCondition, metav1.ConditionFalse, captfv1.WaitingForEndpointReason,
			"Neither the Cluster, the TerraformCluster nor the module's control_plane_endpoint output set an endpoint yet")
	}
}

// setReady summarises. Before provisioning every step counts; after it only health (and
// deletion) does, except for kinds whose applies keep counting (pools): a failed re-apply of a
// cluster or machine must not flip the Cluster's InfrastructureReady and suspend health checks.
func setReady[T capi.Object](p *pass[T], countApplies bool) {
	types := []string{captfv1.InfrastructureHealthyCondition, clusterv1.DeletingCondition}
	if !ptr.Deref(p.init.Provisioned, false) {
		types = append(types, captfv1.DependenciesReadyCondition, captfv1.ApplyJobSucceededCondition,
			captfv1.StateReadableCondition, captfv1.OutputsValidCondition)
	} else if countApplies {
		types = append(types, captfv1.ApplyJobSucceededCondition)
	}
	capi.SetReady(p.scope.Object, types, []string{clusterv1.DeletingCondition})
}

func dependenciesCondition[T capi.Object](p *pass[T]) (string, metav1.ConditionStatus, string, string, bool) {
	t := captfv1.DependenciesReadyCondition
	switch p.inputsWait {
	case "":
		if p.rendered == nil && p.stored == nil {
			return "", "", "", "", false
		}
		if msg := clusterNotTerraform(p); msg != "" {
			return t, metav1.ConditionFalse, captfv1.ClusterNotTerraformReason, msg, true
		}
		return t, metav1.ConditionTrue, captfv1.DependenciesReadyReason, "", true
	case captfv1.VariablesSourceNotFoundReason, captfv1.VariablesInvalidReason, captfv1.CredentialsNotFoundReason:
		return t, metav1.ConditionFalse, p.inputsWait, errText(p.inputsErr), true
	case captfv1.InputsTooLargeReason:
		return t, metav1.ConditionTrue, captfv1.DependenciesReadyReason, "", true
	}
	return t, metav1.ConditionUnknown, p.inputsWait, waitMessage(p.inputsWait), true
}

// clusterNotTerraform says why a machine or pool of a Cluster of another provider receives
// captf_cluster_outputs = {}; "" for a TerraformCluster's (and for clusters).
func clusterNotTerraform[T capi.Object](p *pass[T]) string {
	c := p.scope.Cluster
	if p.owner.Kind == captfv1.KindCluster || c == nil || isTerraformCluster(c.Spec.InfrastructureRef) {
		return ""
	}
	ref := c.Spec.InfrastructureRef
	return fmt.Sprintf("Cluster %s's infrastructure is %s %s (%s), not a TerraformCluster: the module runs with captf_cluster_outputs = {} "+
		"and no cluster failure domains, as no cluster module hands it anything", c.Name, ref.Kind, ref.Name, ref.APIGroup)
}

func waitMessage(reason string) string {
	switch reason {
	case captfv1.WaitingForOwnerReason:
		return "Waiting for the CAPI owner object"
	case captfv1.WaitingForBootstrapDataReason:
		return "Waiting for the bootstrap provider to write the bootstrap data Secret"
	case captfv1.WaitingForClusterInfrastructureReason:
		return "Waiting for the TerraformCluster to be provisioned and its exports to be readable"
	}
	return ""
}

func stateCondition[T capi.Object](p *pass[T]) (metav1.ConditionStatus, string, string, bool) {
	switch {
	case p.snap != nil && p.lockForeign:
		return metav1.ConditionFalse, captfv1.StateLockedReason, errText(p.stateErr), true
	case p.snap != nil:
		return metav1.ConditionTrue, captfv1.StateReadReason,
			fmt.Sprintf("Serial %d, %d resources, %d bytes", p.snap.Serial, p.snap.Resources, p.snap.Bytes), true
	case p.stateErr == nil:
		return "", "", "", false
	}
	reason := reasonOf(p.stateErr)
	if reason == captfv1.StateNotFoundReason {
		if p.decision.Reason == captfv1.StateLostReason {
			return metav1.ConditionFalse, reason, stateLostMessage, true
		}
		return metav1.ConditionUnknown, reason, "No state yet: nothing was applied", true
	}
	return metav1.ConditionFalse, reason, errText(p.stateErr), true
}

// applyCondition reports the apply side: a running Job, what the decision waits for, or the
// newest apply's result.
func applyCondition[T capi.Object](p *pass[T]) (metav1.ConditionStatus, string, string) {
	if job := p.started; job != nil && !background(p.decision.Op) {
		return metav1.ConditionUnknown, captfv1.ApplyRunningReason, fmt.Sprintf("Started %s Job %s", p.decision.Op, job.Name)
	}
	if job := p.active; job != nil {
		op := captfv1.Operation(job.Labels[captfv1.OperationLabel])
		if r := p.podsRefused; r != nil { // a running Job without a Pod (podrefusal.go)
			return metav1.ConditionFalse, r.reason, r.Error()
		}
		if !background(op) {
			return metav1.ConditionUnknown, captfv1.ApplyRunningReason, fmt.Sprintf("%s Job %s is running", op, job.Name)
		}
	}
	d := p.decision
	if d.Pending != "" {
		if s, msg, ok := startWaitCondition(p); ok {
			return s, d.Reason, msg
		}
	}
	if p.inputsWait == captfv1.InputsTooLargeReason {
		return metav1.ConditionFalse, captfv1.InputsTooLargeReason, errText(p.inputsErr)
	}
	switch d.Reason {
	case captfv1.StateLostReason:
		return metav1.ConditionFalse, d.Reason, stateLostMessage
	case captfv1.DurableInputsMissingReason:
		return metav1.ConditionFalse, d.Reason, durableInputsMissingMessage
	case captfv1.StateTooLargeReason, captfv1.StateNotPersistedReason:
		return metav1.ConditionFalse, d.Reason, notPersistedMessage(p)
	case captfv1.DestructivePlanBlockedReason:
		return metav1.ConditionFalse, d.Reason, planMessage(p, "The plan deletes or replaces resources and waits for an approved TerraformPlan")
	case captfv1.PlanAwaitingApprovalReason, captfv1.PlanChangedReason:
		return metav1.ConditionUnknown, d.Reason, planMessage(p, "A plan waits for approval")
	case captfv1.ApprovalsNotEnforcedReason:
		return metav1.ConditionFalse, d.Reason, "The approved plan does not apply: approvals are not honoured while the API server does not enforce " +
			"the policies they rest on: " + p.approvalsUnenforced
	case captfv1.WaitingForJobSlotReason:
		if p.slotsErr != nil {
			return metav1.ConditionUnknown, d.Reason, "The active Jobs could not be counted, so no Job starts until they are: " + p.slotsErr.Error()
		}
		if p.slots.Reached != "" {
			return metav1.ConditionUnknown, d.Reason, "Waiting for a Job slot: " + p.slots.Reached + " is reached"
		}
		return metav1.ConditionUnknown, d.Reason, "The cap on active Jobs is reached"
	}
	last := p.status.LastRun
	for i := range p.jobList { // newest recorded apply or destroy, or failed plan (Manual)
		j := &p.jobList[i]
		op := captfv1.Operation(j.Labels[captfv1.OperationLabel])
		res := captfv1.RunResult(j.Annotations[captfv1.BookkeptAnnotation])
		failedPlan := op == captfv1.OperationPlan && res == captfv1.RunFailed &&
			j.Annotations[captfv1.InputsHashAnnotation] == p.input.InputsHash
		if res == "" || (op != captfv1.OperationApply && op != captfv1.OperationDestroy && !failedPlan) {
			continue
		}
		switch {
		case res == captfv1.RunSucceeded && op == captfv1.OperationDestroy:
			return metav1.ConditionTrue, captfv1.DestroySucceededReason, "Job " + j.Name
		case res == captfv1.RunSucceeded:
			return metav1.ConditionTrue, captfv1.ApplySucceededReason, "Job " + j.Name
		case res == captfv1.RunFailed:
			reason := captfv1.ApplyFailedReason
			if op == captfv1.OperationDestroy {
				reason = captfv1.DestroyFailedReason
			}
			msg := "Job " + j.Name + " failed"
			kind, summary := runError(j, last)
			if summary != "" {
				msg += ": " + summary
			}
			if kind == "deadline" {
				reason = captfv1.JobDeadlineExceededReason
			}
			if d.Wait && d.RequeueAfter > 0 {
				msg += fmt.Sprintf(" (retrying in %s)", d.RequeueAfter.Round(1e9))
			}
			return metav1.ConditionFalse, reason, msg
		}
		break
	}
	if p.snap != nil && p.snap.InputsHash != "" {
		return metav1.ConditionTrue, captfv1.ApplySucceededReason, "The state records a successful apply"
	}
	return metav1.ConditionUnknown, captfv1.NoApplyYetReason, noApplyMessage(d)
}

// runError is a failed Job's error kind and summary: as bookkeeping recorded them on the Job,
// else (a Job recorded by a manager before that) from status.lastRun when it is that Job's.
func runError(j *batchv1.Job, last *captfv1.RunSummary) (kind, summary string) {
	if k, ok := j.Annotations[errorKindAnnotation]; ok {
		return k, j.Annotations[errorAnnotation]
	}
	if last != nil && last.Job == j.Name && last.Error != nil {
		return last.Error.Kind, last.Error.Summary
	}
	return "", ""
}

// background operations read and record what is there; they apply nothing, so while one runs
// ApplyJobSucceeded keeps reporting the newest apply (a pool's Ready counts it, and a pool
// refreshes its membership every minute).
func background(op captfv1.Operation) bool {
	return op == captfv1.OperationRefresh || op == captfv1.OperationDrift
}

// startWaitCondition reports why a due operation's Job did not start (decide.Decision.Pending):
// False for what only an operator fixes, Unknown for what passes by itself. ok=false leaves it
// to another condition (a restore's backup: RestoreJobSucceeded says so).
func startWaitCondition[T capi.Object](p *pass[T]) (s metav1.ConditionStatus, msg string, ok bool) {
	switch p.decision.Reason {
	case captfv1.RestoreBackupInvalidReason:
		return "", "", false
	case captfv1.JobPolicyInvalidReason:
		if p.policyErr != nil {
			return metav1.ConditionFalse, p.policyErr.Error(), true
		}
		return metav1.ConditionFalse, p.accountInvalid, true
	case captfv1.PodQuotaExceededReason, captfv1.PodSecurityRefusedReason, captfv1.PodsRefusedReason:
		var err error
		if p.lastRefusal != nil {
			err = p.lastRefusal.err
		}
		return metav1.ConditionFalse, podRefusalMessage(err), true
	case captfv1.QuotaExceededReason:
		msg := "A ResourceQuota refused the Job"
		if p.lastRefusal != nil {
			msg += ": " + errText(p.lastRefusal.err)
		}
		return metav1.ConditionFalse, msg, true
	case captfv1.CredentialsNotFoundReason:
		return metav1.ConditionUnknown, errText(p.inputsErr), true
	}
	if p.leaseWait != nil && p.leaseWait.Message != "" {
		return metav1.ConditionUnknown, p.leaseWait.Message, true
	}
	return metav1.ConditionUnknown, "Waiting before starting " + string(p.decision.Pending), true
}

// What an operator can do about the two holds that no Job can clear (docs/captf/deletion.md).
const (
	stateLostMessage = "The state is gone although an apply succeeded before: nothing runs, since a new apply " +
		"would build a second set of infrastructure. Restore a backup (annotation captf.io/restore-state=<serial>, " +
		"see status.stateBackups) or delete the object with deletionPolicy: Retain"
	durableInputsMissingMessage = "The durable inputs Secret is gone and a machine is only destroyed with the inputs " +
		"it was applied with: set deletionPolicy: Retain to let the deletion finish without a destroy"
)

func noApplyMessage(d decide.Decision) string {
	if d.Wait && d.Reason != "" {
		return "Waiting: " + d.Reason
	}
	return "No apply has run yet"
}

func planMessage[T capi.Object](p *pass[T], lead string) string {
	if p.pendingPlan == nil {
		return lead
	}
	s := p.pendingPlan.Spec.Summary
	return fmt.Sprintf("%s: TerraformPlan %s (%d to create, %d to update, %d to replace, %d to delete); review and approve with `kubectl captf approve %s -n %s`",
		lead, p.pendingPlan.Name, s.Create, s.Update, s.Replace, s.Delete, p.pendingPlan.Name, p.pendingPlan.Namespace)
}

func outputsCondition[T capi.Object](p *pass[T]) (metav1.ConditionStatus, string, string) {
	if p.providerIDChanged {
		return metav1.ConditionFalse, captfv1.ProviderIDChangedReason,
			"The module reported a different provider_id than the one latched in spec.providerID; the machine keeps the first"
	}
	if p.endpointChanged != "" {
		return metav1.ConditionFalse, captfv1.ControlPlaneEndpointChangedReason, p.endpointChanged
	}
	if p.outputs == nil {
		return metav1.ConditionUnknown, captfv1.OutputsPendingReason, ""
	}
	switch p.outputs.Status() {
	case outputs.Valid:
		return metav1.ConditionTrue, captfv1.OutputsValidReason, ""
	case outputs.Pending:
		return metav1.ConditionUnknown, captfv1.OutputsPendingReason, p.outputs.Message()
	}
	return metav1.ConditionFalse, captfv1.OutputsInvalidReason, p.outputs.Message()
}

func healthCondition(h *captfv1.Health) (metav1.ConditionStatus, string, string) {
	if h == nil {
		return metav1.ConditionUnknown, captfv1.HealthUnknownReason, "The module reports no health yet"
	}
	switch {
	case h.State == "running" && h.Healthy:
		return metav1.ConditionTrue, captfv1.HealthyReason, h.Message
	case h.State == "running":
		return metav1.ConditionFalse, captfv1.InstanceUnhealthyReason, h.Message
	case h.State == "pending":
		return metav1.ConditionFalse, captfv1.InstancePendingReason, h.Message
	case h.State == "degraded":
		return metav1.ConditionFalse, captfv1.InstanceDegradedReason, h.Message
	case h.State == "stopped":
		return metav1.ConditionFalse, captfv1.InstanceStoppedReason, h.Message
	case h.State == "terminated":
		return metav1.ConditionFalse, captfv1.InstanceTerminatedReason, h.Message
	}
	return metav1.ConditionUnknown, captfv1.HealthUnknownReason, h.Message
}

func driftCondition[T capi.Object](p *pass[T]) (metav1.ConditionStatus, string, string, bool) {
	newest := newestBookkept(p.jobList, captfv1.OperationDrift, "")
	drift := newestBookkept(p.jobList, captfv1.OperationDrift, captfv1.RunSucceeded)
	failed := ""
	if newest != nil && newest != drift {
		failed = "; the newest check, Job " + newest.Name + ", failed"
	}
	if drift == nil {
		switch {
		case newest != nil:
			return metav1.ConditionUnknown, captfv1.DriftNotCheckedReason, "No drift check succeeded yet" + failed, true
		case p.status.LastDriftCheck == nil:
			return metav1.ConditionUnknown, captfv1.DriftNotCheckedReason, "No drift check ran yet", true
		}
		return "", "", "", false
	}
	n := drift.Annotations[driftAnnotation]
	if n == "" || n == "0" {
		return metav1.ConditionFalse, captfv1.NoDriftReason, "Drift check " + drift.Name + " found none" + failed, true
	}
	reason := captfv1.DriftReportedReason
	if p.decision.Reason == decide.ReasonDriftRemediation {
		reason = captfv1.DriftRemediatingReason
	}
	return metav1.ConditionTrue, reason, fmt.Sprintf("Drift check %s found %s drifted resources%s", drift.Name, n, failed), true
}

func restoreCondition[T capi.Object](p *pass[T]) (metav1.ConditionStatus, string, string, bool) {
	v, ok := p.scope.Object.GetAnnotations()[captfv1.RestoreStateAnnotation]
	if !ok {
		return "", "", "", false
	}
	if p.decision.Reason == captfv1.RestoreBackupInvalidReason {
		return metav1.ConditionFalse, captfv1.RestoreBackupInvalidReason,
			errText(p.backupErr) + "; nothing was restored: remove the annotation, or name another serial", true
	}
	if p.decision.Reason == captfv1.RestoreBackupNotFoundReason {
		return metav1.ConditionFalse, captfv1.RestoreBackupNotFoundReason,
			"No complete backup of serial " + v + " exists; see status.stateBackups", true
	}
	for i := range p.jobList {
		j := &p.jobList[i]
		if !answersRestore(j, v) {
			continue
		}
		switch captfv1.RunResult(j.Annotations[captfv1.BookkeptAnnotation]) {
		case captfv1.RunSucceeded:
			return metav1.ConditionTrue, captfv1.StateRestoredReason, "Serial " + v + " restored by Job " + j.Name, true
		case "":
			return metav1.ConditionUnknown, captfv1.ApplyRunningReason, "Restore Job " + j.Name + " is running", true
		default:
			return metav1.ConditionFalse, captfv1.RestoreFailedReason,
				"Restore Job " + j.Name + " failed; it is not retried for the same serial: remove the annotation and set it again", true
		}
	}
	return metav1.ConditionUnknown, captfv1.NoApplyYetReason, "Restore of serial " + v + " requested", true
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func listSome(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(" and %d more", len(items)-n)
}
