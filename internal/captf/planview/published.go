package planview

import (
	"fmt"
	"sort"

	tfjson "github.com/hashicorp/terraform-json"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// The view a plan's Job writes lives in Secrets (the runner can write nothing else), which an
// approver may not be allowed to read. The manager publishes it, once it has checked it against
// the saved plan, in TerraformPlanViews: the same chunks under the same names, readable with the
// plan approver role, and bound into the plan hash by their digest (the plan's spec.viewDigest).

// Withheld replaces every value in a view the manager builds itself (see Withhold).
const Withheld = "(not shown)"

// Withhold is the view of plan the manager publishes when its Job's view is missing or does
// not list the plan's changes: every change, with no value shown (the manager has not the
// Job's redactor, so it shows none).
func Withhold(plan *tfjson.Plan) *View {
	v := FromPlan(plan, func(string) string { return Withheld })
	v.Withheld = true
	return v
}

// Lists reports whether v lists exactly plan's changes: the same addresses with the same
// actions, and as many of them (a truncated view lists a part, every one of them the plan's).
// The values it shows are the Job's (redacted there); which resources change, and how, is
// checked here against the saved plan whose hash an approval names.
func Lists(v *View, plan *tfjson.Plan) bool {
	want := FromPlan(plan, nil)
	if v.TotalChanges != want.TotalChanges || (!v.Truncated && len(v.Changes) != len(want.Changes)) || len(v.Changes) > len(want.Changes) {
		return false
	}
	actions := make(map[string]string, len(want.Changes))
	for _, c := range want.Changes {
		actions[c.Address+"\x00"+c.Deposed] = c.Action
	}
	seen := make(map[string]bool, len(v.Changes))
	for _, c := range v.Changes {
		k := c.Address + "\x00" + c.Deposed
		if a, ok := actions[k]; !ok || a != c.Action || seen[k] {
			return false
		}
		seen[k] = true
	}
	if len(v.Outputs) != len(want.Outputs) {
		return false
	}
	for i, o := range v.Outputs {
		if o.Name != want.Outputs[i].Name || o.Action != want.Outputs[i].Action {
			return false
		}
	}
	return true
}

// Publish encodes v as the TerraformPlanViews of TerraformPlan plan in namespace, each with
// labels and no owner (the caller sets the plan as owner), and returns them with the digest
// the plan records.
func Publish(v *View, plan, namespace string, labels map[string]string) ([]*captfv1.TerraformPlanView, string, error) {
	secrets, err := Encode(v, plan, namespace, labels)
	if err != nil {
		return nil, "", err
	}
	digest := secrets[0].Annotations[DigestAnnotation]
	out := make([]*captfv1.TerraformPlanView, len(secrets))
	for i, s := range secrets {
		out[i] = &captfv1.TerraformPlanView{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: s.Name, Labels: s.Labels},
			Plan:       plan, Part: int32(i), Parts: int32(len(secrets)), Digest: digest, Data: s.Data[DataKey],
		}
	}
	return out, digest, nil
}

// Read decodes the view of TerraformPlan plan from its TerraformPlanViews (in any order): they
// must be the plan's, complete, and have the digest the plan recorded (digest).
func Read(plan, digest string, parts []captfv1.TerraformPlanView) (*View, error) {
	if digest == "" {
		return nil, fmt.Errorf("plan view %w: the plan records no view digest", ErrCorrupt)
	}
	mine := make([]captfv1.TerraformPlanView, 0, len(parts))
	for _, p := range parts {
		if p.Plan == plan {
			mine = append(mine, p)
		}
	}
	if len(mine) == 0 {
		return nil, fmt.Errorf("plan view %w: no TerraformPlanView of plan %s", ErrCorrupt, plan)
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].Part < mine[j].Part })
	secrets := make([]*corev1.Secret, len(mine))
	for i, p := range mine {
		if p.Digest != digest {
			return nil, fmt.Errorf("plan view %w: TerraformPlanView %s has digest %s, the plan recorded %s (it was rewritten since)", ErrCorrupt, p.Name, p.Digest, digest)
		}
		if int(p.Parts) != len(mine) || int(p.Part) != i {
			return nil, fmt.Errorf("plan view %w: %d TerraformPlanViews of plan %s, part %d says %d of %d", ErrCorrupt, len(mine), plan, i, p.Part, p.Parts)
		}
		secrets[i] = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Annotations: map[string]string{PlanAnnotation: plan}},
			Data:       map[string][]byte{DataKey: p.Data},
		}
	}
	secrets[0].Annotations[ChunksAnnotation] = fmt.Sprint(len(mine))
	secrets[0].Annotations[DigestAnnotation] = digest
	return Decode(plan, secrets)
}
