package controllers_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// TestRestoreSupersedesPendingPlan: a plan is made against one state; a restore replaces that
// state, so the plan waiting for approval can no longer be what an approval lets apply. The
// restore supersedes it (phase label and status), the API server then refuses its approval,
// and the current inputs are planned again, against the restored state.
func TestRestoreSupersedesPendingPlan(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := scenario(t)
	tc := newPendingChange(t, ns)
	old := &captfv1.TerraformPlan{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.Status.PendingPlanRef.Name}, old)).To(Succeed())
	serial := readState(t, ns, captfv1.KindCluster, "c1").Serial
	waitFor(t, tc, time.Minute, "the applied state backed up", func(o *captfv1.TerraformCluster) bool {
		return backedUp(o, serial)
	})

	annotate(t, tc, captfv1.RestoreStateAnnotation, ptr.To(strconv.FormatInt(serial, 10)))
	waitFor(t, tc, 2*time.Minute, "restored", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.RestoreJobSucceededCondition, metav1.ConditionTrue, captfv1.StateRestoredReason)
	})
	g.Eventually(func() captfv1.PlanPhase {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(old), old)).To(Succeed())
		return captfv1.PlanPhase(old.Labels[captfv1.PlanPhaseLabel])
	}, 30*time.Second, 200*time.Millisecond).Should(Equal(captfv1.PlanSuperseded), "the plan made against the replaced state")
	g.Expect(old.Status.Phase).To(Equal(captfv1.PlanSuperseded))
	g.Expect(old.Status.Conditions).To(ContainElement(And(
		HaveField("Type", captfv1.ReadyCondition), HaveField("Message", ContainSubstring("restore")))))

	// Nobody can approve it any more.
	patch := client.MergeFrom(old.DeepCopy())
	old.Spec.Approved, old.Spec.ApprovedBy = true, "alice"
	g.Expect(env.As(t, "alice").Patch(ctx, old, patch)).NotTo(Succeed(), "approving a superseded plan")

	// The change is planned again, against the restored state.
	waitFor(t, tc, 2*time.Minute, "a new plan of the current inputs", func(o *captfv1.TerraformCluster) bool {
		return o.Status.PendingPlanRef != nil && o.Status.PendingPlanRef.Name != old.Name && o.Status.ActiveJob == nil
	})
	fresh := &captfv1.TerraformPlan{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.Status.PendingPlanRef.Name}, fresh)).To(Succeed())
	g.Expect(fresh.Labels[captfv1.PlanPhaseLabel]).To(Equal(string(captfv1.PlanPending)))
	g.Expect(fresh.Spec.InputsHash).To(Equal(old.Spec.InputsHash), "the same inputs")
	g.Expect(fresh.Spec.PlanHash).NotTo(Equal(old.Spec.PlanHash), "bound to the restored state")
}
