package controllers

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/capx-io/capx/config/admission"
)

// TestPolicyDiffers: a policy approvals rest on counts only as shipped; every way to narrow or
// weaken it is told apart, and what the API server only defaults is not.
func TestPolicyDiffers(t *testing.T) {
	shipped, err := shippedPolicies(admission.Files)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range approvalPolicies {
		want := shipped[name]
		if want == nil {
			t.Fatalf("%s is not shipped", name)
		}
		for _, tc := range []struct {
			what string
			edit func(*admissionregistrationv1.ValidatingAdmissionPolicySpec)
			diff string
		}{
			{"as shipped", func(*admissionregistrationv1.ValidatingAdmissionPolicySpec) {}, ""},
			{"with the server's defaults", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
				s.MatchConstraints.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
				s.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{}
				s.MatchConstraints.ObjectSelector = &metav1.LabelSelector{}
			}, ""},
			{"failing open", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
				s.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
			}, "its failurePolicy is not Fail"},
			{"an object selector", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
				s.MatchConstraints.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"checked": "yes"}}
			}, "its matchConstraints exclude objects"},
			{"excluded resources", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
				s.MatchConstraints.ExcludeResourceRules = s.MatchConstraints.ResourceRules
			}, "its matchConstraints exclude objects"},
			{"one operation less", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
				s.MatchConstraints.ResourceRules[0].Operations = s.MatchConstraints.ResourceRules[0].Operations[:1]
			}, "its resourceRules differ"},
			{"a validation that always passes", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
				s.Validations[0].Expression = "true"
			}, "its validations differ"},
			{"a condition that matches nothing", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
				s.MatchConditions = append(s.MatchConditions, admissionregistrationv1.MatchCondition{Name: "never", Expression: "false"})
			}, "its matchConditions differ"},
			{"a variable changed", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
				s.Variables[0].Expression = "false"
			}, "its variables differ"},
		} {
			have := want.DeepCopy()
			tc.edit(&have.Spec)
			if got := policyDiffers(want, have); got != tc.diff {
				t.Errorf("%s %s: got %q, want %q", name, tc.what, got, tc.diff)
			}
		}
	}
}

func TestDenyingBinding(t *testing.T) {
	binding := func(edit func(*admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec)) []admissionregistrationv1.ValidatingAdmissionPolicyBinding {
		b := admissionregistrationv1.ValidatingAdmissionPolicyBinding{Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: "p", ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		}}
		edit(&b.Spec)
		return []admissionregistrationv1.ValidatingAdmissionPolicyBinding{b}
	}
	for _, tc := range []struct {
		what     string
		bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
		want     bool
	}{
		{"none", nil, false},
		{"denying", binding(func(*admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {}), true},
		{"another policy's", binding(func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) { s.PolicyName = "q" }), false},
		{"warning only", binding(func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
			s.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn, admissionregistrationv1.Audit}
		}), false},
		{"narrowed to some namespaces", binding(func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
			s.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}
		}), false},
		{"with parameters", binding(func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
			s.ParamRef = &admissionregistrationv1.ParamRef{Name: "x"}
		}), false},
	} {
		if got := denyingBinding(tc.bindings, "p"); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.what, got, tc.want)
		}
	}
}
