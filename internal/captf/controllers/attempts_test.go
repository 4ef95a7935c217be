package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// TestManualApprovalAfterTheJobsAreGone: under applyPolicy Manual, a plan made by an approved
// apply that planned again (the state had moved on) waits for its own approval. Its Jobs then
// go, as clusterctl move leaves them behind, while the plan stays. Approved with the state moved
// on again, the apply plans again: it is the first apply of these inputs the cluster can see,
// like the one that made the waiting plan, and its plan still waits under a name of its own
// instead of the waiting plan's (where it was never recorded, and a plan Job, itself numbered
// like a plan Job that had gone, had to plan it again); approved, it applies.
func TestManualApprovalAfterTheJobsAreGone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := scenario(t)
	const kind = captfv1.KindCluster
	tc := newPendingChange(t, ns)

	// approveOvertaken approves the waiting plan after the state moved on and returns the plan
	// its apply made instead.
	approveOvertaken := func(what string) *captfv1.TerraformPlan {
		t.Helper()
		plan := &captfv1.TerraformPlan{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.Status.PendingPlanRef.Name}, plan)).To(Succeed())
		movedOn := moveStateOn(t, ns, kind, "c1")
		approve(t, plan, "alice")
		waitFor(t, tc, 2*time.Minute, what, func(o *captfv1.TerraformCluster) bool {
			return o.Status.PendingPlanRef != nil && o.Status.PendingPlanRef.Name != plan.Name && o.Status.ActiveJob == nil
		})
		g.Expect(readState(t, ns, kind, "c1").Serial).To(Equal(movedOn), "nothing was applied")
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(plan), plan)).To(Succeed())
		g.Expect(plan.Labels[captfv1.PlanPhaseLabel]).To(Equal(string(captfv1.PlanFailed)))
		next := &captfv1.TerraformPlan{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.Status.PendingPlanRef.Name}, next)).To(Succeed())
		g.Expect(next.Labels[captfv1.PlanPhaseLabel]).To(Equal(string(captfv1.PlanPending)))
		// The approved apply's own plan, not one a plan Job made after the apply's was lost.
		made := &batchv1.Job{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: next.Status.Job}, made)).To(Succeed())
		g.Expect(made.Labels[captfv1.OperationLabel]).To(Equal(string(captfv1.OperationApply)), "the plan of %s", next.Status.Job)
		return next
	}
	approveOvertaken("the plan Job's plan overtaken, the apply's plan waiting")

	// The Jobs go; the plans stay.
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"}}
	update(t, c, func(o *clusterv1.Cluster) { o.Spec.Paused = ptr.To(true) })
	waitFor(t, tc, time.Minute, "paused", func(o *captfv1.TerraformCluster) bool {
		return conditions.IsTrue(o, clusterv1.PausedCondition)
	})
	for _, j := range jobsOf(t, ns, kind, "c1") {
		g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, &j, client.PropagationPolicy(metav1.DeletePropagationBackground)))).To(Succeed())
	}
	g.Eventually(func() int { return len(jobsOf(t, ns, kind, "c1")) }, time.Minute, 200*time.Millisecond).Should(BeZero())
	update(t, c, func(o *clusterv1.Cluster) { o.Spec.Paused = ptr.To(false) })
	waitFor(t, tc, time.Minute, "unpaused, the plan still waiting", func(o *captfv1.TerraformCluster) bool {
		return conditions.IsFalse(o, clusterv1.PausedCondition) && o.Status.PendingPlanRef != nil &&
			hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionUnknown, captfv1.PlanAwaitingApprovalReason)
	})

	last := approveOvertaken("the apply's plan overtaken, the next apply's plan waiting under its own name")
	approve(t, last, "alice")
	waitFor(t, tc, 2*time.Minute, "the approved plan applied", func(o *captfv1.TerraformCluster) bool {
		return o.Status.PendingPlanRef == nil && o.Status.ActiveJob == nil && o.Status.AppliedInputsHash == last.Spec.InputsHash
	})
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(last), last)).To(Succeed())
	g.Expect(last.Labels[captfv1.PlanPhaseLabel]).To(Equal(string(captfv1.PlanApplied)))
}
