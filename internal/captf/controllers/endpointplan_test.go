package controllers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/planview"
	"github.com/capx-io/capx/internal/cli/captf/plan/show"
)

// TestPlanShowsWhatItDoesToTheContract (issue 25): the generated root module re-exports every
// contract output as sensitive, so a plan showed each as "(sensitive value) -> (sensitive
// value)" and a replace that moves the control-plane endpoint looked harmless. The approver sees
// the non-secret contract outputs' values (the exports stay masked), and a plan that moves the
// endpoint latched in spec.controlPlaneEndpoint (which Cluster API never follows) is flagged
// before anyone approves it: on the plan's summary, by a label and by a Warning Event.
func TestPlanShowsWhatItDoesToTheContract(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := scenario(t)
	tc := newTerraformCluster(t, ns, "c1", nil)
	waitFor(t, tc, 2*time.Minute, "provisioned, the endpoint latched", func(o *captfv1.TerraformCluster) bool {
		return provisioned(o.Status.Initialization) && o.Status.ActiveJob == nil && o.Spec.ControlPlaneEndpoint.IsValid()
	})
	latched := fmt.Sprintf("%s:%d", tc.Spec.ControlPlaneEndpoint.Host, tc.Spec.ControlPlaneEndpoint.Port)

	// A new network CIDR replaces the network (held), and the module reports another endpoint.
	update(t, tc, func(o *captfv1.TerraformCluster) {
		o.Spec.Variables = vars(map[string]any{"network_cidr": "10.9.0.0/16", "endpoint_host": "moved.capx.test"})
	})
	waitFor(t, tc, 2*time.Minute, "the replace held", func(o *captfv1.TerraformCluster) bool {
		return o.Status.PendingPlanRef != nil && o.Status.ActiveJob == nil
	})
	tp := &captfv1.TerraformPlan{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.Status.PendingPlanRef.Name}, tp)).To(Succeed())
	g.Expect(tp.Spec.Summary.EndpointChange).To(Equal(&captfv1.PlanEndpointChange{Latched: latched, Planned: "moved.capx.test:6443"}))
	g.Expect(tp.Labels).To(HaveKeyWithValue(captfv1.MovesEndpointLabel, "true"))
	g.Eventually(func() []string { return eventReasons(t, ns, "c1") }, 30*time.Second, 200*time.Millisecond).
		Should(ContainElement("PlanMovesEndpoint"))

	shown := show.Load(ctx, asApprover(t, ns), tp)
	g.Expect(shown.ViewAvailable).To(BeTrue(), shown.ViewProblem)
	outs := map[string]planview.OutputChange{}
	for _, o := range shown.Outputs {
		outs[o.Name] = o
	}
	g.Expect(outs).To(HaveKey("control_plane_endpoint"))
	ep := outs["control_plane_endpoint"]
	g.Expect(ep.Before).To(HaveValue(ContainSubstring(tc.Spec.ControlPlaneEndpoint.Host)))
	g.Expect(ep.After).To(HaveValue(ContainSubstring("moved.capx.test")))
	g.Expect(outs).To(HaveKey("exports"))
	g.Expect(outs["exports"].After).To(HaveValue(Equal(planview.Sensitive)), "the exports may carry secrets")

	// A plan that leaves the endpoint where it is carries no flag.
	update(t, tc, func(o *captfv1.TerraformCluster) {
		o.Spec.Variables = vars(map[string]any{"network_cidr": "10.8.0.0/16"})
	})
	waitFor(t, tc, 2*time.Minute, "the other replace held", func(o *captfv1.TerraformCluster) bool {
		return o.Status.PendingPlanRef != nil && o.Status.PendingPlanRef.Name != tp.Name && o.Status.ActiveJob == nil
	})
	other := &captfv1.TerraformPlan{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.Status.PendingPlanRef.Name}, other)).To(Succeed())
	g.Expect(other.Spec.Summary.EndpointChange).To(BeNil())
	g.Expect(other.Labels).NotTo(HaveKey(captfv1.MovesEndpointLabel))
}
