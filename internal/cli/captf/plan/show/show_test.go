package show

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/planview"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/testenv/golden"
)

func testPlan(t testing.TB) *Plan {
	b, err := os.ReadFile("testdata/plan.json")
	if err != nil {
		t.Fatal(err)
	}
	tp := &tfjson.Plan{}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(tp); err != nil {
		t.Fatal(err)
	}
	v := planview.FromPlan(tp, nil)
	return &Plan{
		TypeMeta: cmdutil.Meta("PlanView"), Name: "web-0123456789", Namespace: "team-a",
		Target: captfv1.PlanTarget{Kind: "TerraformCluster", Name: "web"}, Phase: captfv1.PlanPending,
		Reason: captfv1.PlanReasonDestructive, PlanHash: "p2:abc123",
		Summary:       captfv1.PlanSummary{Create: 1, Update: 1, Replace: 1, Delete: 1, OutputChanges: 2},
		ViewAvailable: true, Changes: v.Changes, Outputs: v.Outputs, TotalChanges: v.TotalChanges,
	}
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		golden     string
		colour     bool
		attributes bool
	}{
		{"plan.golden", false, true},
		{"plan-summary.golden", false, false},
		{"plan-colour.golden", true, true},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			var b bytes.Buffer
			Render(&b, cmdutil.NewStyles(&b, tc.colour), "kubectl captf", testPlan(t), tc.attributes)
			if !tc.colour && bytes.Contains(b.Bytes(), []byte("\x1b[")) {
				t.Fatal("escape codes with colour off")
			}
			golden.Assert(t, filepath.Join("testdata", tc.golden), b.Bytes())
		})
	}
}

func TestRenderWithoutView(t *testing.T) {
	p := testPlan(t)
	p.ViewAvailable, p.ViewProblem, p.Changes, p.Outputs = false, "its Job stored no readable changes", nil, nil
	p.Summary.Resources = []string{"terraform_data.old (delete)"}
	p.Job = "captf-c-web-plan-a1-123456"
	var b bytes.Buffer
	Render(&b, cmdutil.NewStyles(&b, false), "kubectl captf", p, true)
	golden.Assert(t, filepath.Join("testdata", "plan-noview.golden"), b.Bytes())
	if !p.HasChanges() {
		t.Fatal("a summary with counts has changes")
	}
	if (&Plan{}).HasChanges() {
		t.Fatal("an empty plan has changes")
	}
}

// TestRenderListsInIndexOrder: resources are listed as tofu show lists them (r[2] before
// r[1000]), also from a view published in byte order.
func TestRenderListsInIndexOrder(t *testing.T) {
	p := testPlan(t)
	p.Changes = nil
	for _, a := range []string{"r.x[0]", "r.x[1000]", "r.x[2]", "module.m[10].r.x", "module.m[9].r.x", `r.x["a"]`} {
		p.Changes = append(p.Changes, planview.ResourceChange{Address: a, Action: planview.ActionCreate})
	}
	var b bytes.Buffer
	Render(&b, cmdutil.NewStyles(&b, false), "kubectl captf", p, false)
	out := b.String()
	last := -1
	for _, a := range []string{"r.x[0]", "r.x[2]", "r.x[1000]", `r.x["a"]`, "module.m[9].r.x", "module.m[10].r.x"} {
		i := strings.Index(out, "+ "+a+"\n")
		if i < 0 || i < last {
			t.Fatalf("%s out of order (at %d, previous at %d):\n%s", a, i, last, out)
		}
		last = i
	}
}
