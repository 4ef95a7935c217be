package controllers

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/inputs"
)

// A pool reads the cluster's exports at every reconcile, so a change of the cluster module can
// make the pool's plan destructive. Such a change is held: its TerraformPlan waits for approval
// while the pool keeps applying (replica changes go through) with the exports of its last
// successful apply, which the durable inputs Secret records (inputs.ExportsRecord). A record
// that cannot be kept (over the Secret's budget, or an apply of other exports that did not
// succeed) holds nothing back: every destructive plan then waits with the whole pool, as for
// any other kind, until an apply succeeds and the record is kept again.

// exportsHold is what a pool's pass found of its exports record and the hold.
type exportsHold struct {
	// record is the exports record after settling it with what happened since it was written.
	record inputs.ExportsRecord
	// plan is the pending TerraformPlan of the held change; nil when nothing is held.
	plan *captfv1.TerraformPlan
}

// settleExports brings a pool's exports record up to date (pure). When the state records the
// durable inputs' hash, those inputs were applied: their exports are the record. An apply of
// other exports that the guard stopped changed nothing and leaves the record as it was; one that
// failed or was interrupted may have changed anything, and the record is lost. An apply whose
// outcome is not in the Job list yet (running, or not in the cache yet) keeps it pending.
func settleExports(stored *inputs.Stored, stateHash string, list []batchv1.Job) inputs.ExportsRecord {
	if stateHash != "" && stateHash == stored.Hash {
		return inputs.KeptExports(stored.Rendered)
	}
	rec := stored.Exports
	if rec.Pending == "" {
		return rec
	}
	for i := range list { // newest first
		j := &list[i]
		res := captfv1.RunResult(j.Annotations[captfv1.BookkeptAnnotation])
		if j.Labels[captfv1.OperationLabel] != string(captfv1.OperationApply) ||
			j.Annotations[captfv1.InputsHashAnnotation] != rec.Pending || res == "" {
			continue
		}
		switch res {
		case captfv1.RunBlocked, captfv1.RunPlanChanged:
			rec.Pending = ""
			return rec
		case captfv1.RunSucceeded:
			// Applied, but the state no longer records it: a later run replaced the state.
		}
		return inputs.ExportsRecord{Status: inputs.ExportsApplyFailed}
	}
	return rec
}

// holdExports settles the pool's exports record and, when the cluster's current exports (in
// src) differ from the record and the pool's inputs with them wait as a destructive
// TerraformPlan, renders the recorded exports instead. It runs while the pool is live and its
// durable inputs exist; the plans are read live, and only while the exports differ.
func (e *engine) holdExports(ctx context.Context, p *pass[*captfv1.TerraformMachinePool], src *inputs.Source) error {
	if p.stored == nil || !p.scope.Object.GetDeletionTimestamp().IsZero() {
		return nil
	}
	stateHash := ""
	if p.snap != nil {
		stateHash = p.snap.InputsHash
	}
	h := &exportsHold{record: settleExports(p.stored, stateHash, p.jobList)}
	p.exportsHold = h
	if !h.record.Equal(p.stored.Exports) { // as read just now: a settled record costs no request
		if _, err := inputs.WriteExportsRecord(ctx, e.client, p.owner, h.record); err != nil {
			return err
		}
	}
	if !h.record.Usable() || inputs.SameExports(src.ClusterOutputs, h.record.Exports) {
		return nil
	}
	candidate, err := inputs.Render(*src)
	if err != nil {
		return nil // renderInputs renders the same source and reports why
	}
	plan, err := e.heldPlan(ctx, p, candidate.Hash)
	if err != nil || plan == nil {
		return err
	}
	h.plan = plan
	src.ClusterOutputs = h.record.Exports
	p.status.PendingPlanRef = &corev1.LocalObjectReference{Name: plan.Name}
	// The stopped apply stored its inputs as the durable ones, which a destroy runs with. When
	// the state already records the held inputs, nothing will apply them again: store them back.
	if held, err := inputs.Render(*src); err == nil && held.Hash == stateHash && held.Hash != p.stored.Hash {
		if _, err := inputs.Ensure(ctx, e.client, p.owner, held); err != nil {
			return err
		}
	}
	return nil
}

// heldPlan is the pool's live, unapproved TerraformPlan of the inputs hash that the destructive
// guard recorded (reason Destructive), read from the API server: the plan may have been recorded
// by this very pass. Manual plans hold the whole pool, as on every kind. An approval binds the
// state's serial too, which the held pool's own applies (and membership refreshes) move on: the
// approved apply of an overtaken plan plans again, and its new plan is held the same way.
func (e *engine) heldPlan(ctx context.Context, p *pass[*captfv1.TerraformMachinePool], hash string) (*captfv1.TerraformPlan, error) {
	list := &captfv1.TerraformPlanList{}
	if err := e.reader.List(ctx, list, client.InNamespace(p.owner.Namespace), p.owner.Selector()); err != nil {
		return nil, fmt.Errorf("list the TerraformPlans of %s: %w", p.owner.Name, err)
	}
	for i := range list.Items {
		tp := &list.Items[i]
		if tp.Spec.InputsHash == hash && planLive(tp) && !planTerminal(tp) && planFor(tp, p.owner) &&
			!tp.Spec.Approved && tp.Spec.Reason == captfv1.PlanReasonDestructive {
			return tp, nil
		}
	}
	return nil, nil
}

// setExportsCondition reports ClusterExportsCurrent from what holdExports found.
func setExportsCondition(mp *captfv1.TerraformMachinePool, h *exportsHold) {
	if h == nil {
		return
	}
	c := metav1.Condition{Type: captfv1.ClusterExportsCurrentCondition, Status: metav1.ConditionTrue,
		Reason: captfv1.ExportsAppliedReason, ObservedGeneration: mp.Generation}
	switch {
	case h.plan != nil:
		c.Status, c.Reason = metav1.ConditionFalse, captfv1.ExportsChangeHeldReason
		c.Message = fmt.Sprintf("The cluster's changed exports make the pool's plan destructive: TerraformPlan %s waits for approval "+
			"(`kubectl captf approve %s -n %s`). Until then the pool applies with the exports of its last successful apply",
			h.plan.Name, h.plan.Name, mp.Namespace)
	case h.record.Status == inputs.ExportsOverBudget:
		c.Reason = captfv1.ExportsRecordNotKeptReason
		c.Message = "The record of the exports the pool last applied does not fit the durable inputs Secret beside its inputs: " +
			"a destructive change of the cluster's exports holds the whole pool, replica changes included, until it is approved"
	case h.record.Status == inputs.ExportsApplyFailed:
		c.Reason = captfv1.ExportsRecordNotKeptReason
		c.Message = "An apply of other exports did not succeed, so the exports the pool last applied are unknown: " +
			"a destructive change of the cluster's exports holds the whole pool, replica changes included, until an apply succeeds"
	}
	conditions.Set(mp, c)
}
