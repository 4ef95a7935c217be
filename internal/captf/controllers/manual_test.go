package controllers_test

import (
	"context"
	"maps"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// countJobsNamed counts the Jobs of the namespace with the name (0 or 1).
func countJobsNamed(t *testing.T, ns, name string) int {
	t.Helper()
	list := &batchv1.JobList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, j := range list.Items {
		if j.Name == name {
			n++
		}
	}
	return n
}

func plansOf(t *testing.T, ns string) []captfv1.TerraformPlan {
	t.Helper()
	list := &captfv1.TerraformPlanList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// newManualCluster creates TerraformCluster c1 under applyPolicy Manual with settings as its
// variables, and waits until its first apply, which needs no approval, provisioned it.
func newManualCluster(t *testing.T, ns string, settings map[string]any) *captfv1.TerraformCluster {
	t.Helper()
	tc := newTerraformCluster(t, ns, "c1", func(o *captfv1.TerraformCluster) {
		o.Spec.ApplyPolicy = captfv1.ApplyPolicyManual
		o.Spec.Variables = vars(settings)
	})
	waitFor(t, tc, 2*time.Minute, "provisioned without approval", func(o *captfv1.TerraformCluster) bool {
		return provisioned(o.Status.Initialization) && o.Status.ActiveJob == nil
	})
	return tc
}

// newPendingChange is newManualCluster with failure domain fd-a, then changed to fd-a and fd-b:
// it returns once that change waits as a plan for approval and no Job runs.
func newPendingChange(t *testing.T, ns string) *captfv1.TerraformCluster {
	t.Helper()
	settings := map[string]any{"failure_domains": []string{"fd-a"}}
	tc := newManualCluster(t, ns, settings)
	settings["failure_domains"] = []string{"fd-a", "fd-b"}
	update(t, tc, func(o *captfv1.TerraformCluster) { o.Spec.Variables = vars(settings) })
	waitFor(t, tc, 2*time.Minute, "a plan awaiting approval", func(o *captfv1.TerraformCluster) bool {
		return o.Status.PendingPlanRef != nil && o.Status.ActiveJob == nil
	})
	return tc
}

// TestManualApplyPolicy: under applyPolicy Manual the first apply runs at once; a change runs a
// plan Job and waits as a Pending TerraformPlan (reason Manual) with
// ApplyJobSucceeded=Unknown/PlanAwaitingApproval, applying nothing until a real user approves
// it; the approved plan applies and goes Applied. A change whose plan alters only outputs, or
// nothing, needs no approval.
func TestManualApplyPolicy(t *testing.T) {
	g := NewWithT(t)
	ns, _ := scenario(t)
	const kind = captfv1.KindCluster
	settings := map[string]any{"failure_domains": []string{"fd-a", "fd-b"}}

	tc := newManualCluster(t, ns, settings)
	g.Expect(plansOf(t, ns)).To(BeEmpty(), "the first apply needs no plan")

	// A change is planned and waits.
	applied := tc.Status.AppliedInputsHash
	serial := readState(t, ns, kind, "c1").Serial
	settings["failure_domains"] = []string{"fd-a", "fd-b", "fd-c"}
	update(t, tc, func(o *captfv1.TerraformCluster) { o.Spec.Variables = vars(settings) })
	waitFor(t, tc, 2*time.Minute, "a plan awaiting approval", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionUnknown, captfv1.PlanAwaitingApprovalReason) &&
			o.Status.PendingPlanRef != nil
	})
	plan := &captfv1.TerraformPlan{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: tc.Status.PendingPlanRef.Name}, plan)).To(Succeed())
	g.Expect(plan.Spec.Reason).To(Equal(captfv1.PlanReasonManual))
	g.Expect(plan.Status.Phase).To(Equal(captfv1.PlanPending))
	g.Expect(plan.Spec.Summary.Create).To(BeEquivalentTo(1))
	g.Expect(opsOf(t, ns, kind, "c1")).To(ConsistOf("apply", "plan"))
	g.Expect(plan.Status.Job).NotTo(BeEmpty(), "status.job names the plan Job whose log holds the plan")
	g.Expect(opsOf(t, ns, kind, "c1")).To(ContainElement("plan"))
	g.Expect(countJobsNamed(t, ns, plan.Status.Job)).To(Equal(1))

	// Plans the manager did not record for c1 never stand in for its approval (issue 9): one
	// that copies c1's labels, owner and hashes but targets another object, and one that a
	// clusterctl move brought back without its status (phase label Applied). Both are newer
	// than the real plan, which the manager would otherwise weigh first. (Creation timestamps
	// have whole seconds.)
	time.Sleep(1100 * time.Millisecond)
	forge := func(name string, edit func(*captfv1.TerraformPlan)) *captfv1.TerraformPlan {
		f := &captfv1.TerraformPlan{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, Labels: plan.Labels, OwnerReferences: plan.OwnerReferences,
		}, Spec: plan.Spec}
		f.Spec.Approved, f.Spec.ApprovedBy = true, "admin"
		edit(f)
		create(t, f)
		return f
	}
	forged := []*captfv1.TerraformPlan{
		forge("c1-other-target", func(f *captfv1.TerraformPlan) { f.Spec.TargetRef.Name = "c2" }),
		forge("c1-moved-applied", func(f *captfv1.TerraformPlan) {
			f.Labels = maps.Clone(plan.Labels)
			f.Labels[captfv1.PlanPhaseLabel] = string(captfv1.PlanApplied)
		}),
	}
	annotate(t, tc, "capx.test/touch", ptr.To("forged"))
	never(t, 4*time.Second, "something applied before the approval", func() bool {
		return readState(t, ns, kind, "c1").Serial != serial || countJobs(t, ns, kind, "c1", captfv1.OperationApply) > 1
	})
	for _, f := range forged {
		g.Expect(env.Client.Delete(context.Background(), f)).To(Succeed())
	}

	// Approved by a real (impersonated) user, it applies.
	approve(t, plan, "alice")
	waitFor(t, tc, 2*time.Minute, "the approved plan applied", func(o *captfv1.TerraformCluster) bool {
		return o.Status.ActiveJob == nil && o.Status.AppliedInputsHash != applied && o.Status.PendingPlanRef == nil &&
			len(o.Status.FailureDomains) == 3
	})
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(plan), plan)).To(Succeed())
	g.Expect(plan.Status.Phase).To(Equal(captfv1.PlanApplied))

	// Changes whose plan alters only outputs, or nothing at all (a default spelled out), apply
	// without a TerraformPlan.
	for _, change := range []struct {
		what, name string
		value      any
	}{
		{"only outputs", "exports_extra", map[string]string{"dns_zone": "c1.capx.test"}},
		{"nothing", "network_cidr", "10.0.0.0/16"},
	} {
		applied = tc.Status.AppliedInputsHash
		settings[change.name] = change.value
		update(t, tc, func(o *captfv1.TerraformCluster) { o.Spec.Variables = vars(settings) })
		waitFor(t, tc, 2*time.Minute, "a change of "+change.what+" applied without approval", func(o *captfv1.TerraformCluster) bool {
			return o.Status.ActiveJob == nil && o.Status.AppliedInputsHash != applied &&
				hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionTrue, captfv1.ApplySucceededReason)
		})
		g.Expect(plansOf(t, ns)).To(HaveLen(1), "a change of %s made no TerraformPlan", change.what)
	}
	// status.exports lists the keys of the exports, never a value: the output is sensitive.
	g.Expect(tc.Status.Exports).NotTo(BeNil())
	g.Expect(string(tc.Status.Exports.Raw)).To(Equal(`["dns_zone","endpoint_host","network_cidr","network_id","network_name"]`))
}
