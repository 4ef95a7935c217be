package controllers_test

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// TestPlanFailureIsReported (issue 25): under applyPolicy Manual a change is planned first. A
// plan Job that fails (here a variable the module's validation refuses, at step plan) is the
// change's failure: every status written once its Job is recorded carries the error in
// ApplyJobSucceeded (False/ApplyFailed), and the retry backs off like a failed apply's instead
// of planning again at once.
func TestPlanFailureIsReported(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := scenario(t)
	tc := newManualCluster(t, ns, map[string]any{"health_state": "running"})

	type seen struct{ job, status, reason, message string }
	var mu sync.Mutex
	var after []seen // what each status said once it recorded a failed plan Job
	stop := poll(t, func() {
		o := &captfv1.TerraformCluster{}
		if env.Client.Get(ctx, client.ObjectKeyFromObject(tc), o) != nil || o.Status.LastRun == nil ||
			o.Status.LastRun.Operation != captfv1.OperationPlan || o.Status.LastRun.Result != captfv1.RunFailed {
			return
		}
		c := conditions.Get(o, captfv1.ApplyJobSucceededCondition)
		mu.Lock()
		after = append(after, seen{o.Status.LastRun.Job, string(c.Status), c.Reason, c.Message})
		mu.Unlock()
	})
	update(t, tc, func(o *captfv1.TerraformCluster) {
		o.Spec.Variables = vars(map[string]any{"health_state": "bogus"})
	})
	waitFor(t, tc, 2*time.Minute, "the plan failed", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionFalse, captfv1.ApplyFailedReason)
	})
	g.Expect(conditions.Get(tc, captfv1.ApplyJobSucceededCondition).Message).To(And(
		ContainSubstring("Invalid value for variable"), ContainSubstring("retrying in")))
	plans := countJobs(t, ns, captfv1.KindCluster, "c1", captfv1.OperationPlan)
	g.Expect(plans).To(Equal(1))
	never(t, 5*time.Second, "a failed plan planned again at once", func() bool {
		return countJobs(t, ns, captfv1.KindCluster, "c1", captfv1.OperationPlan) != plans
	})
	stop()
	mu.Lock()
	defer mu.Unlock()
	g.Expect(after).NotTo(BeEmpty())
	for _, s := range after {
		g.Expect(s.status).To(Equal(string(metav1.ConditionFalse)), "the status after Job %s was recorded", s.job)
		g.Expect(s.reason).To(Equal(captfv1.ApplyFailedReason))
		g.Expect(s.message).To(And(ContainSubstring("Job "+s.job+" failed"), ContainSubstring("Invalid value for variable")))
	}
}
