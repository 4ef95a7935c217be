package controllers

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/outputs"
)

// TestClusterEndpointChanged: the endpoint is written once; a module that later reports
// another one (after an approved replace) is reported, never written.
func TestClusterEndpointChanged(t *testing.T) {
	a := clusterv1.APIEndpoint{Host: "192.0.2.10", Port: 6443}
	b := clusterv1.APIEndpoint{Host: "192.0.2.99", Port: 6443}
	for _, tc := range []struct {
		name     string
		spec     clusterv1.APIEndpoint
		source   string
		output   *clusterv1.APIEndpoint
		wantSpec clusterv1.APIEndpoint
		changed  bool
	}{
		{name: "first endpoint is copied", output: &a, wantSpec: a},
		{name: "the same endpoint again", spec: a, source: "module", output: &a, wantSpec: a},
		{name: "the module moved its endpoint", spec: a, source: "module", output: &b, wantSpec: a, changed: true},
		{name: "the module reports none for now", spec: a, source: "module", wantSpec: a},
		{name: "the user's endpoint is not the module's to keep", spec: a, source: "user", output: &b, wantSpec: a},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := &captfv1.TerraformCluster{}
			obj.Spec.ControlPlaneEndpoint = tc.spec
			if tc.source != "" {
				obj.Annotations = map[string]string{captfv1.EndpointSourceAnnotation: tc.source}
			}
			p := &pass[*captfv1.TerraformCluster]{
				scope:  &reconcileScope[*captfv1.TerraformCluster]{Object: obj},
				status: &obj.Status.WorkspaceStatus, init: &obj.Status.Initialization,
			}
			out := &outputs.Result{ControlPlaneEndpoint: tc.output}
			clusterKind{}.applyOutputs(p, out)
			g.Expect(obj.Spec.ControlPlaneEndpoint).To(Equal(tc.wantSpec))
			g.Expect(p.endpointChanged != "").To(Equal(tc.changed))
			if !tc.changed {
				return
			}
			p.outputs = out
			updateStatus(p, clusterKind{})
			c := conditions.Get(obj, captfv1.OutputsValidCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(captfv1.ControlPlaneEndpointChangedReason))
			g.Expect(c.Message).To(And(ContainSubstring("192.0.2.99:6443"), ContainSubstring("keeps 192.0.2.10:6443")))
		})
	}
}
