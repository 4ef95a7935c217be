package approve

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

func TestFlags(t *testing.T) {
	streams, _, _, _ := cmdutil.TestIOStreams(false)
	f := cmdutil.NewTestFactory(streams, "kubectl captf", nil, nil, nil, "ns")
	var got *Options
	cmd := NewCmd(f, func(o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"tfc/web", "--hash", "p2:ab", "--wait", "--timeout", "5m", "-y", "-o", "yaml"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Arg != "tfc/web" || got.Hash != "p2:ab" || !got.Wait || got.Timeout != 5*time.Minute || !got.Yes || got.Output != cmdutil.YAML {
		t.Fatalf("%+v", got)
	}
}

func TestRefusal(t *testing.T) {
	plan := func(phase captfv1.PlanPhase, approvedBy string) *captfv1.TerraformPlan {
		return &captfv1.TerraformPlan{
			ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns", Labels: map[string]string{captfv1.PlanPhaseLabel: string(phase)}},
			Spec: captfv1.TerraformPlanSpec{TargetRef: captfv1.PlanTarget{Kind: "TerraformCluster", Name: "web"}, PlanHash: "p2:aa",
				Approved: approvedBy != "", ApprovedBy: approvedBy},
		}
	}
	for _, tc := range []struct {
		tp   *captfv1.TerraformPlan
		hash string
		want string
	}{
		{plan(captfv1.PlanPending, ""), "", ""},
		{plan(captfv1.PlanPending, ""), "p2:aa", ""},
		{plan(captfv1.PlanApproved, "alice"), "", ""},
		{plan(captfv1.PlanPending, ""), "p2:bb", "kubectl captf plan show web-1 -n ns"},
		{plan(captfv1.PlanSuperseded, ""), "", "kubectl captf plan show terraformcluster/web -n ns"},
		{plan(captfv1.PlanFailed, "alice"), "", "the new plan waits"},
		{plan(captfv1.PlanApplied, "alice"), "", "already applied"},
		{plan(captfv1.PlanApproved, "bob"), "", "already approved by bob"},
	} {
		err := Refusal(tc.tp, tc.hash, "alice", "kubectl captf")
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s %s: %v, want %q", tc.tp.Labels[captfv1.PlanPhaseLabel], tc.hash, err, tc.want)
		}
	}
}
