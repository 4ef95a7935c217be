package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/capx-io/capx/config/admission"
)

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get;list;watch

// An approval is only as good as the admission policies it rests on: captf-plan-approval (an
// approval names its approver; nothing is created approved; an ended plan is frozen) and
// captf-plan-manager-fields (what only the manager writes: a plan's phase label, its owner, its
// published view). Without them anyone with patch on plans could approve in another's name or
// revive an ended plan, so the manager honours approvals only while the API server enforces both
// exactly as this manager ships them (failing closed): an approved plan then waits, with
// ApplyJobSucceeded=False/ApprovalsNotEnforced and a Warning naming what is missing.
var approvalPolicies = []string{"captf-plan-approval", "captf-plan-manager-fields"}

// approvalGuard checks the policies approvals rest on, from the manager's cache (a watch keeps
// it current: a policy deleted is noticed by the next pass).
type approvalGuard struct {
	reader client.Reader
	want   map[string]*admissionregistrationv1.ValidatingAdmissionPolicy
}

func newApprovalGuard(reader client.Reader) (*approvalGuard, error) {
	want, err := shippedPolicies(admission.Files)
	if err != nil {
		return nil, err
	}
	for _, name := range approvalPolicies {
		if want[name] == nil {
			return nil, fmt.Errorf("this build ships no admission policy %s", name)
		}
	}
	return &approvalGuard{reader: reader, want: want}, nil
}

// shippedPolicies reads the ValidatingAdmissionPolicies of the embedded policy files.
func shippedPolicies(files fs.FS) (map[string]*admissionregistrationv1.ValidatingAdmissionPolicy, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	out := map[string]*admissionregistrationv1.ValidatingAdmissionPolicy{}
	for _, name := range names {
		data, err := fs.ReadFile(files, name)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var p admissionregistrationv1.ValidatingAdmissionPolicy
			if err := dec.Decode(&p); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("admission policy file %s: %w", name, err)
			}
			if p.Kind == "ValidatingAdmissionPolicy" {
				out[p.Name] = &p
			}
		}
	}
	return out, nil
}

// unenforced says why approvals are not honoured now ("" when both policies are enforced as
// shipped).
func (g *approvalGuard) unenforced(ctx context.Context) (string, error) {
	bindings := &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{}
	if err := g.reader.List(ctx, bindings); err != nil {
		return "", fmt.Errorf("list ValidatingAdmissionPolicyBindings: %w", err)
	}
	var why []string
	for _, name := range approvalPolicies {
		have := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		err := g.reader.Get(ctx, client.ObjectKey{Name: name}, have)
		switch {
		case apierrors.IsNotFound(err):
			why = append(why, "the ValidatingAdmissionPolicy "+name+" is missing")
			continue
		case err != nil:
			return "", fmt.Errorf("get ValidatingAdmissionPolicy %s: %w", name, err)
		}
		if diff := policyDiffers(g.want[name], have); diff != "" {
			why = append(why, "the ValidatingAdmissionPolicy "+name+" is not the one this manager ships ("+diff+")")
		}
		if !denyingBinding(bindings.Items, name) {
			why = append(why, "no ValidatingAdmissionPolicyBinding makes "+name+" deny (validationActions Deny, no matchResources or paramRef)")
		}
	}
	if len(why) == 0 {
		return "", nil
	}
	return strings.Join(why, "; ") + ": reinstall the manager's admission policies (config/admission, part of the release's infrastructure-components.yaml)", nil
}

// policyDiffers names the first part of have that differs from the shipped policy want ("" for
// none). What the API server defaults is left out; what could narrow or weaken a policy is not.
func policyDiffers(want, have *admissionregistrationv1.ValidatingAdmissionPolicy) string {
	w, h := want.Spec, have.Spec
	if h.FailurePolicy == nil || *h.FailurePolicy != admissionregistrationv1.Fail {
		return "its failurePolicy is not Fail"
	}
	if h.MatchConstraints == nil || w.MatchConstraints == nil {
		return "it matches nothing"
	}
	if len(h.MatchConstraints.ExcludeResourceRules) > 0 || !emptySelector(h.MatchConstraints.NamespaceSelector) || !emptySelector(h.MatchConstraints.ObjectSelector) {
		return "its matchConstraints exclude objects"
	}
	if len(h.MatchConstraints.ResourceRules) != len(w.MatchConstraints.ResourceRules) {
		return "its resourceRules differ"
	}
	for i, r := range w.MatchConstraints.ResourceRules {
		g := h.MatchConstraints.ResourceRules[i]
		if !slices.Equal(g.Operations, r.Operations) || !slices.Equal(g.APIGroups, r.APIGroups) || !slices.Equal(g.APIVersions, r.APIVersions) ||
			!slices.Equal(g.Resources, r.Resources) || len(g.ResourceNames) > 0 {
			return "its resourceRules differ"
		}
	}
	switch {
	case !equality.Semantic.DeepEqual(h.MatchConditions, w.MatchConditions):
		return "its matchConditions differ"
	case !equality.Semantic.DeepEqual(h.Variables, w.Variables):
		return "its variables differ"
	case !equality.Semantic.DeepEqual(h.Validations, w.Validations):
		return "its validations differ"
	}
	return ""
}

func emptySelector(s *metav1.LabelSelector) bool {
	return s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0)
}

// denyingBinding reports whether one of the bindings makes policy deny everything it matches.
func denyingBinding(bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding, policy string) bool {
	for _, b := range bindings {
		if b.Spec.PolicyName == policy && slices.Contains(b.Spec.ValidationActions, admissionregistrationv1.Deny) &&
			b.Spec.MatchResources == nil && b.Spec.ParamRef == nil && b.DeletionTimestamp.IsZero() {
			return true
		}
	}
	return false
}

// checkApprovalsAtStart logs, once the cache runs, whether approvals are honoured: an operator
// who forgot the policies learns it from the manager's log before any approval waits on it.
func checkApprovalsAtStart(g *approvalGuard) manager.RunnableFunc {
	return func(ctx context.Context) error {
		why, err := g.unenforced(ctx)
		log := ctrl.LoggerFrom(ctx).WithName("approvals")
		switch {
		case err != nil:
			log.Error(err, "Could not check the admission policies approvals rest on; approvals wait until they can be checked")
		case why != "":
			log.Error(nil, "Approvals are not honoured: "+why)
		default:
			log.Info("The admission policies approvals rest on are enforced", "policies", approvalPolicies)
		}
		return nil
	}
}
