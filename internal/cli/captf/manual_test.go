package captf_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/planview"
	"github.com/capx-io/capx/internal/cli/captf/plan/show"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/testenv/mgrtest"
)

// TestManualPlan: under applyPolicy Manual a change runs a plan Job (the runner's plan
// operation, not a guarded apply) that stores its view too; status shows the pending plan,
// plan show the creates, and approving by the object name applies it.
func TestManualPlan(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t)
	startManager(t, ns)

	settings := map[string]any{"failure_domains": []string{"fd-a"}}
	cluster := testenv.Cluster(ns, "m1", "TerraformCluster", "m1")
	create(t, cluster)
	tc := testenv.TerraformCluster(ns, "m1", "m1", clusterImage)
	tc.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "m1", UID: cluster.UID, Controller: ptr.To(true)}}
	tc.Spec.ApplyPolicy = captfv1.ApplyPolicyManual
	tc.Spec.Variables = vars(settings)
	create(t, tc)
	mgrtest.WaitFor(t, env, tc, 3*time.Minute, "provisioned", func(o *captfv1.TerraformCluster) bool {
		return ptr.Deref(o.Status.Initialization.Provisioned, false) && o.Status.ActiveJob == nil
	})

	settings["failure_domains"] = []string{"fd-a", "fd-b"}
	patch := client.MergeFrom(tc.DeepCopy())
	tc.Spec.Variables = vars(settings)
	g.Expect(env.Client.Patch(ctx, tc, patch)).To(Succeed())
	mgrtest.WaitFor(t, env, tc, 3*time.Minute, "a plan waiting", func(o *captfv1.TerraformCluster) bool {
		return o.Status.PendingPlanRef != nil && o.Status.ActiveJob == nil
	})
	planName := tc.Status.PendingPlanRef.Name

	r := run(t, ns, runOpts{}, "status", "m1")
	g.Expect(r.code).To(Equal(cmdutil.ExitOK), r.String())
	g.Expect(r.out).To(MatchRegexp(`TerraformCluster/m1 .*` + planName))

	var view show.Plan
	r = run(t, ns, runOpts{}, "plan", "show", "tfc/m1", "-o", "yaml")
	g.Expect(r.code).To(Equal(cmdutil.ExitFound), r.String())
	g.Expect(r.out).To(HavePrefix("apiVersion: cli.capx.io/v1alpha1\n"))
	run(t, ns, runOpts{}, "plan", "show", planName, "-o", "json").decode(t, &view)
	g.Expect(view.Reason).To(Equal(captfv1.PlanReasonManual))
	g.Expect(view.ViewAvailable).To(BeTrue(), view.ViewProblem)
	var creates []string
	for _, c := range view.Changes {
		if c.Action == planview.ActionCreate {
			creates = append(creates, c.Address)
		}
	}
	g.Expect(creates).To(ConsistOf(`module.role.terraform_data.failure_domain["fd-b"]`))
	r = run(t, ns, runOpts{}, "plan", "show", planName)
	g.Expect(r.out).To(ContainSubstring("waiting for approval because applyPolicy is Manual"))
	g.Expect(r.out).To(ContainSubstring(`+ module.role.terraform_data.failure_domain["fd-b"]`))

	// Approved by the object's name on a terminal, answering yes; then applied.
	r = run(t, ns, runOpts{user: "bob", tty: true, stdin: "y\n"}, "approve", "m1", "--wait", "--timeout", "3m")
	g.Expect(r.code).To(Equal(cmdutil.ExitOK), r.String())
	tp := &captfv1.TerraformPlan{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: planName}, tp)).To(Succeed())
	g.Expect(tp.Spec.ApprovedBy).To(Equal("bob"))
	r = run(t, ns, runOpts{}, "plan", "list")
	g.Expect(r.out).To(ContainSubstring("No plans wait for approval"))
	r = run(t, ns, runOpts{}, "plan", "list", "--all", "-o", "json")
	g.Expect(r.out).To(ContainSubstring(`"phase": "Applied"`))
}
