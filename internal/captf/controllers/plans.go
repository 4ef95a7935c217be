package controllers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	tfjson "github.com/hashicorp/terraform-json"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/decide"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/planhash"
	"github.com/capx-io/capx/internal/captf/planview"
	"github.com/capx-io/capx/internal/captf/runresult"
	"github.com/capx-io/capx/internal/captf/savedplan"
)

// clusterLabel is CAPI's cluster-name label.
const clusterLabel = clusterv1.ClusterNameLabel

// planLive reports whether a plan can still be approved or applied. Its phase label says so,
// not its status: clusterctl move copies labels and spec but not status, and a plan whose
// status is gone must not come back to life. A plan without the label was not recorded by
// the manager (which labels every plan it creates) and is never live.
func planLive(tp *captfv1.TerraformPlan) bool {
	phase := captfv1.PlanPhase(tp.Labels[captfv1.PlanPhaseLabel])
	return phase == captfv1.PlanPending || phase == captfv1.PlanApproved
}

// planTerminal reports a plan that has ended (Applied, Superseded, Failed) by its label or its
// status: nothing about it changes any more, and the API server refuses edits to it
// (config/admission/captf-plan-approval.yaml).
func planTerminal(tp *captfv1.TerraformPlan) bool {
	terminal := func(p captfv1.PlanPhase) bool {
		return p == captfv1.PlanApplied || p == captfv1.PlanSuperseded || p == captfv1.PlanFailed
	}
	return terminal(captfv1.PlanPhase(tp.Labels[captfv1.PlanPhaseLabel])) || terminal(tp.Status.Phase)
}

// planFor reports whether a plan may answer for the object: it names the object as its target
// and the object controls it. The owner-name label alone is no binding: anyone who can create
// TerraformPlans can copy the labels.
func planFor(tp *captfv1.TerraformPlan, o jobs.Owner) bool {
	if tp.Spec.TargetRef.Kind != o.Kind || tp.Spec.TargetRef.Name != o.Name {
		return false
	}
	ref := metav1.GetControllerOf(tp)
	return ref != nil && o.IsOwnedBy(*ref)
}

// plansOf lists the object's TerraformPlans, newest first.
func (r *provider[T]) plansOf(ctx context.Context, p *pass[T]) ([]captfv1.TerraformPlan, error) {
	list := &captfv1.TerraformPlanList{}
	if err := r.client.List(ctx, list, client.InNamespace(p.owner.Namespace), p.owner.Selector()); err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[j].CreationTimestamp.Before(&list.Items[i].CreationTimestamp)
	})
	return list.Items, nil
}

// currentPlan is the plan the decision weighs for these inputs (it writes nothing): the live
// TerraformPlan made from them, or, when a plan Job found nothing to change, an implicit approval of that empty plan
// (it needs nobody's approval: applying it only records the new inputs).
func (r *provider[T]) currentPlan(ctx context.Context, p *pass[T], inputsHash string) (*decide.Plan, error) {
	plans, err := r.plansOf(ctx, p)
	if err != nil {
		return nil, err
	}
	p.planNames = make(map[string]bool, len(plans))
	for i := range plans {
		p.planNames[plans[i].Name] = true
	}
	for i := range plans {
		tp := &plans[i]
		if tp.Spec.InputsHash != inputsHash || !planLive(tp) || planTerminal(tp) || !planFor(tp, p.owner) {
			continue
		}
		p.pendingPlan = tp // recordApproval marks it Approved once approved
		return &decide.Plan{Name: tp.Name, PlanHash: tp.Spec.PlanHash, Reason: tp.Spec.Reason, Approved: tp.Spec.Approved}, nil
	}
	for i := range p.jobList {
		j := &p.jobList[i]
		if j.Labels[captfv1.OperationLabel] == string(captfv1.OperationPlan) &&
			j.Annotations[captfv1.InputsHashAnnotation] == inputsHash &&
			j.Annotations[planEmptyAnnotation] == "true" {
			return &decide.Plan{PlanHash: j.Annotations[captfv1.PlanHashAnnotation], Approved: true}, nil
		}
	}
	return nil, nil
}

// recordPlan turns a plan a Job reported into a TerraformPlan waiting for approval: the plan of
// a Manual change, the destructive plan the guard stopped, or the new plan of an approved apply
// that planned something else (whose old plan then failed).
func (r *provider[T]) recordPlan(ctx context.Context, p *pass[T], job *batchv1.Job, res captfv1.RunResult, rr *runresult.Result) error {
	if res == captfv1.RunPlanChanged {
		if err := r.finishPlan(ctx, p, job.Annotations[captfv1.PlanAnnotation], captfv1.PlanFailed,
			"The approved plan no longer matched what the apply planned; a new plan waits for approval"); err != nil {
			return err
		}
	}
	if rr == nil || rr.Plan == nil || planIsEmpty(rr.Plan) {
		return nil
	}
	// The manager hashes the plan itself, from the saved plan the Job stored, with a key no Job
	// is given; the summary comes from the same document.
	name := savedplan.PlanName(p.owner.Name, job.Name)
	var view *publishedView
	sp, err := r.readSavedPlan(ctx, p, name, job.Annotations[captfv1.InputsHashAnnotation], func(plan *tfjson.Plan) (string, error) {
		var err error
		view, err = r.planView(ctx, p, name, plan)
		if err != nil {
			return "", err
		}
		return view.digest, nil
	})
	if errors.Is(err, errNoSavedPlan) {
		r.recorder.Eventf(p.scope.Object, corev1.EventTypeWarning, "PlanNotRecorded",
			"Job %s reported a plan but stored no usable saved plan for TerraformPlan %s (%v): there is nothing to approve", job.Name, name, err)
		return nil
	} else if err != nil {
		return err
	}
	reason := captfv1.PlanReasonManual
	if res == captfv1.RunBlocked || (res == captfv1.RunPlanChanged && p.spec.ApplyPolicy != captfv1.ApplyPolicyManual) {
		reason = captfv1.PlanReasonDestructive
	}
	summary := planhash.Summarize(sp.plan)
	tp := newPlan(p.owner.Namespace, p.owner.Kind, p.owner.Name, name, job, reason, sp.hash, summary)
	tp.Labels = p.owner.MoveLabels()
	tp.Labels[captfv1.PlanPhaseLabel] = string(captfv1.PlanPending)
	tp.Labels[captfv1.DestructiveLabel] = strconv.FormatBool(planhash.Destructive(sp.plan))
	if move := endpointMove(p.scope.Object, sp.plan); move != nil {
		tp.Spec.Summary.EndpointChange = move
		tp.Labels[captfv1.MovesEndpointLabel] = "true"
	}
	tp.OwnerReferences = []metav1.OwnerReference{p.owner.ControllerRef()}
	tp.Spec.ViewDigest = view.digest
	if err := r.client.Create(ctx, tp); apierrors.IsAlreadyExists(err) {
		// Recorded before (a pass that failed midway): the plan may have moved on since.
		if err := r.client.Get(ctx, client.ObjectKeyFromObject(tp), tp); err != nil {
			return client.IgnoreNotFound(err)
		}
		if !planLive(tp) {
			return nil
		}
	} else if err != nil {
		return fmt.Errorf("create TerraformPlan %s: %w", tp.Name, err)
	}
	if err := r.setPlanStatus(ctx, tp, captfv1.PlanPending, "Waiting for approval", job.Name); err != nil {
		return err
	}
	if tp.Spec.ViewDigest == view.digest {
		if err := r.publishView(ctx, tp, view); err != nil {
			return err
		}
		if view.withheld != "" {
			r.recorder.Eventf(p.scope.Object, corev1.EventTypeWarning, "PlanViewWithheld",
				"TerraformPlan %s shows its changes without values: %s", tp.Name, view.withheld)
		}
	}
	if err := r.adoptSecrets(ctx, tp, sp.secrets); err != nil {
		return err
	}
	if err := r.supersede(ctx, p, tp.Name); err != nil {
		return err
	}
	p.status.PendingPlanRef = &corev1.LocalObjectReference{Name: tp.Name}
	if move := tp.Spec.Summary.EndpointChange; move != nil {
		r.recorder.Eventf(p.scope.Object, corev1.EventTypeWarning, "PlanMovesEndpoint",
			"TerraformPlan %s moves the control-plane endpoint from %s, which Cluster API keeps using, to %s: approved, the cluster is no longer reached where Cluster API looks for it",
			tp.Name, move.Latched, move.Planned)
	}
	r.recorder.Eventf(p.scope.Object, corev1.EventTypeNormal, "PlanReady",
		"TerraformPlan %s waits for approval (%s: %d to create, %d to update, %d to replace, %d to delete): kubectl captf approve %s -n %s",
		tp.Name, reason, summary.Create, summary.Update, summary.Replace, summary.Delete, tp.Name, tp.Namespace)
	return nil
}

// endpointMove is the plan's move of a TerraformCluster's latched control-plane endpoint (nil
// for other kinds, before an endpoint is latched, or when the plan leaves it): Cluster API never
// follows a new endpoint, so the approver must see it before approving.
func endpointMove(obj any, plan *tfjson.Plan) *captfv1.PlanEndpointChange {
	tc, ok := obj.(*captfv1.TerraformCluster)
	if !ok || !tc.Spec.ControlPlaneEndpoint.IsValid() {
		return nil
	}
	latched := fmt.Sprintf("%s:%d", tc.Spec.ControlPlaneEndpoint.Host, tc.Spec.ControlPlaneEndpoint.Port)
	planned, moves := planview.EndpointChange(plan, latched)
	if !moves {
		return nil
	}
	return &captfv1.PlanEndpointChange{Latched: runresult.Head(latched, 300), Planned: runresult.Head(planned, 300)}
}

// newPlan builds the TerraformPlan name (savedplan.PlanName: it derives from the Job, so
// recording the same Job twice finds the same plan) of a Job's plan.
func newPlan(namespace, kind, target, name string, job *batchv1.Job, reason captfv1.PlanReason, hash string, s runresult.PlanSummary) *captfv1.TerraformPlan {
	return &captfv1.TerraformPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: captfv1.TerraformPlanSpec{
			TargetRef:  captfv1.PlanTarget{Kind: kind, Name: target},
			PlanHash:   hash,
			InputsHash: job.Annotations[captfv1.InputsHashAnnotation],
			Reason:     reason,
			Summary: captfv1.PlanSummary{
				Create: int32(s.Create), Update: int32(s.Update), Replace: int32(s.Replace), Delete: int32(s.Delete),
				OutputChanges: int32(s.OutputChanges), Resources: s.Resources, Truncated: s.Truncated,
			},
		},
	}
}

// planApplied marks the plan an apply Job consumed as Applied.
func (r *provider[T]) planApplied(ctx context.Context, p *pass[T], job *batchv1.Job) error {
	p.status.PendingPlanRef = nil
	return r.finishPlan(ctx, p, job.Annotations[captfv1.PlanAnnotation], captfv1.PlanApplied, "Applied by Job "+job.Name)
}

func (r *provider[T]) finishPlan(ctx context.Context, p *pass[T], name string, phase captfv1.PlanPhase, msg string) error {
	if name == "" {
		return nil
	}
	tp := &captfv1.TerraformPlan{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: p.owner.Namespace, Name: name}, tp); err != nil {
		return client.IgnoreNotFound(err)
	}
	return r.setPlanPhase(ctx, tp, phase, msg)
}

// supersede ends every other live plan of the object: one live plan per target.
func (r *provider[T]) supersede(ctx context.Context, p *pass[T], keep string) error {
	return r.supersedeExcept(ctx, p, keep, "A newer plan replaced it")
}

// supersedeAll ends every live plan of the object, saying why.
func (r *provider[T]) supersedeAll(ctx context.Context, p *pass[T], why string) error {
	return r.supersedeExcept(ctx, p, "", why)
}

func (r *provider[T]) supersedeExcept(ctx context.Context, p *pass[T], keep, why string) error {
	plans, err := r.plansOf(ctx, p)
	if err != nil {
		return err
	}
	for i := range plans {
		if plans[i].Name != keep && planLive(&plans[i]) && planFor(&plans[i], p.owner) {
			if err := r.setPlanPhase(ctx, &plans[i], captfv1.PlanSuperseded, why); err != nil {
				return err
			}
		}
	}
	return nil
}

// setPlanPhase writes a plan's phase to its status and to its phase label (which, unlike
// status, survives clusterctl move). It writes nothing when both already say so, and never
// moves a plan out of a terminal phase.
func (r *provider[T]) setPlanPhase(ctx context.Context, tp *captfv1.TerraformPlan, phase captfv1.PlanPhase, msg string) error {
	return r.setPlanStatus(ctx, tp, phase, msg, "")
}

// setPlanStatus is setPlanPhase that also records the Job that made the plan (status.job, where
// approvers find the human-readable plan in its log).
func (r *provider[T]) setPlanStatus(ctx context.Context, tp *captfv1.TerraformPlan, phase captfv1.PlanPhase, msg, job string) error {
	if planTerminal(tp) && captfv1.PlanPhase(tp.Labels[captfv1.PlanPhaseLabel]) != phase {
		return nil
	}
	if tp.Labels[captfv1.PlanPhaseLabel] != string(phase) {
		before := tp.DeepCopy()
		if tp.Labels == nil {
			tp.Labels = map[string]string{}
		}
		tp.Labels[captfv1.PlanPhaseLabel] = string(phase)
		if err := r.client.Patch(ctx, tp, client.MergeFrom(before)); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	if tp.Status.Phase == phase && (job == "" || tp.Status.Job == job) {
		return nil
	}
	before := tp.DeepCopy()
	tp.Status.Phase = phase
	if job != "" {
		tp.Status.Job = job
	}
	tp.Status.ObservedGeneration = tp.Generation
	ready := metav1.ConditionTrue
	if phase == captfv1.PlanSuperseded || phase == captfv1.PlanFailed {
		ready = metav1.ConditionFalse
	}
	tp.Status.Conditions = setCondition(tp.Status.Conditions, metav1.Condition{
		Type: captfv1.ReadyCondition, Status: ready, Reason: string(phase), Message: msg, ObservedGeneration: tp.Generation,
	})
	approved := metav1.Condition{Type: captfv1.ApprovedCondition, Status: metav1.ConditionFalse,
		Reason: captfv1.PlanNotApprovedReason, ObservedGeneration: tp.Generation}
	if tp.Spec.Approved {
		approved.Status, approved.Reason, approved.Message = metav1.ConditionTrue, captfv1.PlanApprovedReason, "Approved by "+tp.Spec.ApprovedBy
	}
	tp.Status.Conditions = setCondition(tp.Status.Conditions, approved)
	return client.IgnoreNotFound(r.client.Status().Patch(ctx, tp, client.MergeFrom(before)))
}

func setCondition(conds []metav1.Condition, c metav1.Condition) []metav1.Condition {
	c.LastTransitionTime = metav1.Now()
	for i := range conds {
		if conds[i].Type == c.Type {
			if conds[i].Status == c.Status {
				c.LastTransitionTime = conds[i].LastTransitionTime
			}
			conds[i] = c
			return conds
		}
	}
	return append(conds, c)
}
