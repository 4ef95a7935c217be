package controllers

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/addons"
)

// TestAddonsCondition: AddonsReady from one delivery pass: what failed first, then what is not
// available, then what is, and each add-on not installed with why.
func TestAddonsCondition(t *testing.T) {
	skipCSI := addons.Outcome{Name: "csi-driver", Skip: "spec.addons.csi is not set"}
	for _, tc := range []struct {
		name        string
		provisioned bool
		obs         *addons.Observed
		status      metav1.ConditionStatus
		reason      string
		msg         []string
	}{
		{"not provisioned", false, nil, metav1.ConditionUnknown, capvcov1.ProvisioningReason, []string{"once the control plane runs"}},
		{"no kubeconfig", true, &addons.Observed{Waiting: "the kubeconfig Secret x-kubeconfig does not exist yet"}, metav1.ConditionUnknown,
			capvcov1.WaitingForControlPlaneReason, []string{"x-kubeconfig"}},
		{"failed", true, &addons.Observed{Addons: []addons.Outcome{{Name: "cloud-controller-manager", Version: "v1", Err: errors.New("apply Deployment: forbidden")}, skipCSI}},
			metav1.ConditionFalse, capvcov1.AddonsFailedReason, []string{"failed: cloud-controller-manager: apply Deployment: forbidden", "csi-driver not installed (spec.addons.csi is not set)"}},
		{"not available", true, &addons.Observed{Addons: []addons.Outcome{{Name: "cloud-controller-manager", Version: "v1", Checked: true, Applied: true,
			Unavailable: []string{"Deployment kube-system/ccm: 0/2 available"}}}},
			metav1.ConditionFalse, capvcov1.AddonsNotAvailableReason, []string{"cloud-controller-manager v1 applied, waiting for Deployment kube-system/ccm: 0/2 available"}},
		{"available", true, &addons.Observed{Addons: []addons.Outcome{{Name: "cloud-controller-manager", Version: "v1", Checked: true, Applied: true, Available: true}, skipCSI}},
			metav1.ConditionTrue, capvcov1.ProvisionedReason, []string{"installed and available: cloud-controller-manager v1", "csi-driver not installed"}},
	} {
		vc := &capvcov1.VCOCluster{}
		if tc.provisioned {
			vc.Status.Initialization.Provisioned = ptr.To(true)
		}
		setAddonsCondition(vc, tc.obs)
		c := conditions.Get(vc, capvcov1.AddonsReadyCondition)
		if c == nil || c.Status != tc.status || c.Reason != tc.reason {
			t.Errorf("%s: %+v, want %s %s", tc.name, c, tc.status, tc.reason)
			continue
		}
		for _, m := range tc.msg {
			if !strings.Contains(c.Message, m) {
				t.Errorf("%s: message %q lacks %q", tc.name, c.Message, m)
			}
		}
	}
	// Not looked at this pass: the last pass's condition stands.
	vc := &capvcov1.VCOCluster{}
	vc.Status.Initialization.Provisioned = ptr.To(true)
	setAddonsCondition(vc, &addons.Observed{Waiting: "w"})
	setAddonsCondition(vc, nil)
	if c := conditions.Get(vc, capvcov1.AddonsReadyCondition); c == nil || c.Reason != capvcov1.WaitingForControlPlaneReason {
		t.Errorf("a pass that did not look replaced the condition: %+v", c)
	}
}
