package planview

import (
	"encoding/json"
	"strings"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"
	. "github.com/onsi/gomega"
)

// contractPlan is a cluster plan as the generated root module shows it: every contract output
// marked sensitive by the root module, the endpoint moving, the failure domains changing, the
// exports (which may hold secrets) changing too.
func contractPlan(t *testing.T, afterEndpoint any, afterUnknown any) *tfjson.Plan {
	t.Helper()
	ch := func(before, after, unknown any) *tfjson.Change {
		return &tfjson.Change{Actions: tfjson.Actions{tfjson.ActionUpdate}, Before: before, After: after,
			AfterUnknown: unknown, BeforeSensitive: true, AfterSensitive: true}
	}
	return &tfjson.Plan{OutputChanges: map[string]*tfjson.Change{
		"control_plane_endpoint": ch(map[string]any{"host": "a.example", "port": json.Number("6443")}, afterEndpoint, afterUnknown),
		"failure_domains":        ch([]any{map[string]any{"name": "fd-a"}}, []any{map[string]any{"name": "fd-b"}}, false),
		"exports":                ch(map[string]any{"token": "s3cret"}, map[string]any{"token": "n3w"}, false),
	}}
}

// TestContractOutputsAreShown (issue 25): the generated root module marks every output
// sensitive, so a view showed each as "(sensitive value) -> (sensitive value)", and a replace that
// moves the control-plane endpoint looked harmless. The contract outputs CAPTF copies onto the
// CAPI objects are no secret and are shown, through the redactor; the exports stay masked.
func TestContractOutputsAreShown(t *testing.T) {
	g := NewWithT(t)
	redact := func(s string) string { return strings.ReplaceAll(s, "b.example", "[redacted]") }
	v := FromPlan(contractPlan(t, map[string]any{"host": "c.example", "port": json.Number("6443")}, false), redact)
	outs := map[string]OutputChange{}
	for _, o := range v.Outputs {
		outs[o.Name] = o
	}
	g.Expect(*outs["control_plane_endpoint"].Before).To(Equal(`{"host":"a.example","port":6443}`))
	g.Expect(*outs["control_plane_endpoint"].After).To(Equal(`{"host":"c.example","port":6443}`))
	g.Expect(*outs["failure_domains"].After).To(Equal(`[{"name":"fd-b"}]`))
	g.Expect(*outs["exports"].Before).To(Equal(Sensitive))
	g.Expect(*outs["exports"].After).To(Equal(Sensitive))
	raw, _ := json.Marshal(v)
	g.Expect(string(raw)).NotTo(ContainSubstring("s3cret"))

	// Values still pass the redactor, and what is not known yet says so.
	v = FromPlan(contractPlan(t, nil, true), redact)
	g.Expect(*v.Outputs[0].After).To(Equal(Unknown), "control_plane_endpoint sorts first")
	v = FromPlan(contractPlan(t, map[string]any{"host": "b.example", "port": json.Number("6443")}, false), redact)
	g.Expect(*v.Outputs[0].After).To(Equal(`{"host":"[redacted]","port":6443}`))
}

// TestEndpointChange: a plan moves the latched endpoint when it leaves another one, or one not
// known before the apply, or none; a plan that does not touch the output leaves it.
func TestEndpointChange(t *testing.T) {
	for _, tc := range []struct {
		promise string
		plan    *tfjson.Plan
		planned string
		moves   bool
	}{
		{"another endpoint", contractPlan(t, map[string]any{"host": "c.example", "port": json.Number("6443")}, false), "c.example:6443", true},
		{"another port", contractPlan(t, map[string]any{"host": "a.example", "port": json.Number("443")}, false), "a.example:443", true},
		{"the same endpoint written again", contractPlan(t, map[string]any{"host": "a.example", "port": json.Number("6443")}, false), "a.example:6443", false},
		{"one not known before the apply", contractPlan(t, nil, true), Unknown, true},
		{"no change of the output", &tfjson.Plan{}, "", false},
		{"the output removed", &tfjson.Plan{OutputChanges: map[string]*tfjson.Change{"control_plane_endpoint": {
			Actions: tfjson.Actions{tfjson.ActionDelete}, Before: map[string]any{"host": "a.example", "port": json.Number("6443")}}}}, "(none)", true},
	} {
		t.Run(tc.promise, func(t *testing.T) {
			planned, moves := EndpointChange(tc.plan, "a.example:6443")
			NewWithT(t).Expect([]any{planned, moves}).To(Equal([]any{tc.planned, tc.moves}))
		})
	}
}
