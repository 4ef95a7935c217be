package controllers

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/inputs"
)

// TestScalingOf: who sizes a pool, what is rendered, and what CAPTF writes onto the MachinePool.
func TestScalingOf(t *testing.T) {
	const (
		minA = clusterv1.AutoscalerMinSizeAnnotation
		maxA = clusterv1.AutoscalerMaxSizeAnnotation
		byA  = clusterv1.ReplicasManagedByAnnotation
	)
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		replicas    *int32 // MachinePool.spec.replicas
		observed    *int32 // the module's replicas output
		reason      string
		bounds      *inputs.Autoscaling
		rendered    int32
		annotate    *string
		writeBack   *int32
	}{
		{name: "no annotations: spec.replicas", replicas: ptr.To[int32](3), observed: ptr.To[int32](2),
			reason: captfv1.AutoscalingDisabledReason, rendered: 3},
		{name: "no replicas: one", reason: captfv1.AutoscalingDisabledReason, rendered: 1},
		{name: "only min is not autoscaling", annotations: map[string]string{minA: "1"}, replicas: ptr.To[int32](2),
			reason: captfv1.AutoscalingAnnotationsInvalidReason, rendered: 2},
		{name: "min above max", annotations: map[string]string{minA: "5", maxA: "2"}, replicas: ptr.To[int32](2),
			reason: captfv1.AutoscalingAnnotationsInvalidReason, rendered: 2},
		{name: "negative min", annotations: map[string]string{minA: "-1", maxA: "2"}, replicas: ptr.To[int32](2),
			reason: captfv1.AutoscalingAnnotationsInvalidReason, rendered: 2},
		{name: "not a number", annotations: map[string]string{minA: "one", maxA: "2"}, replicas: ptr.To[int32](2),
			reason: captfv1.AutoscalingAnnotationsInvalidReason, rendered: 2},
		{name: "active, first apply: spec.replicas clamped, claimed", annotations: map[string]string{minA: "2", maxA: "5"},
			replicas: ptr.To[int32](1), reason: captfv1.ReplicasManagedByModuleReason,
			bounds: &inputs.Autoscaling{Enabled: true, Min: 2, Max: 5}, rendered: 2, annotate: ptr.To("captf")},
		{name: "active: the observed count is rendered and written back", annotations: map[string]string{minA: "1", maxA: "5", byA: "captf"},
			replicas: ptr.To[int32](2), observed: ptr.To[int32](4), reason: captfv1.ReplicasManagedByModuleReason,
			bounds: &inputs.Autoscaling{Enabled: true, Min: 1, Max: 5}, rendered: 4, writeBack: ptr.To[int32](4)},
		{name: "active: the observed count beyond the bounds is clamped, written back raw", annotations: map[string]string{minA: "1", maxA: "3", byA: "captf"},
			replicas: ptr.To[int32](3), observed: ptr.To[int32](6), reason: captfv1.ReplicasManagedByModuleReason,
			bounds: &inputs.Autoscaling{Enabled: true, Min: 1, Max: 3}, rendered: 3, writeBack: ptr.To[int32](6)},
		{name: "active, in sync: nothing to write", annotations: map[string]string{minA: "0", maxA: "5", byA: "captf"},
			replicas: ptr.To[int32](0), observed: ptr.To[int32](0), reason: captfv1.ReplicasManagedByModuleReason,
			bounds: &inputs.Autoscaling{Enabled: true, Min: 0, Max: 5}, rendered: 0},
		{name: `"false" is no claim`, annotations: map[string]string{minA: "1", maxA: "5", byA: "false"},
			replicas: ptr.To[int32](2), observed: ptr.To[int32](2), reason: captfv1.ReplicasManagedByModuleReason,
			bounds: &inputs.Autoscaling{Enabled: true, Min: 1, Max: 5}, rendered: 2, annotate: ptr.To("captf")},
		{name: "a foreign manager: spec.replicas, nothing written", annotations: map[string]string{minA: "1", maxA: "5", byA: "external-autoscaler"},
			replicas: ptr.To[int32](2), observed: ptr.To[int32](4), reason: captfv1.ReplicasManagedExternallyReason, rendered: 2},
		{name: "an empty value is a foreign claim", annotations: map[string]string{minA: "1", maxA: "5", byA: ""},
			replicas: ptr.To[int32](2), observed: ptr.To[int32](4), reason: captfv1.ReplicasManagedExternallyReason, rendered: 2},
		{name: "autoscaling removed: our claim is released", annotations: map[string]string{byA: "captf"},
			replicas: ptr.To[int32](2), observed: ptr.To[int32](4), reason: captfv1.AutoscalingDisabledReason, rendered: 2, annotate: ptr.To("")},
		{name: "annotations broken: our claim is released", annotations: map[string]string{minA: "9", maxA: "1", byA: "captf"},
			replicas: ptr.To[int32](2), reason: captfv1.AutoscalingAnnotationsInvalidReason, rendered: 2, annotate: ptr.To("")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			mp := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}, Spec: clusterv1.MachinePoolSpec{Replicas: tc.replicas}}
			s := scalingOf(mp, tc.observed)
			g.Expect(s.reason).To(Equal(tc.reason))
			g.Expect(s.bounds).To(Equal(tc.bounds))
			g.Expect(s.replicas).To(Equal(tc.rendered), "rendered replicas")
			g.Expect(s.annotate).To(Equal(tc.annotate), "replicas-managed-by to write")
			g.Expect(s.writeBack).To(Equal(tc.writeBack), "spec.replicas to write")
			g.Expect(s.message).NotTo(BeEmpty())
		})
	}
}

// TestPoolStatus: status.ready follows provisioned (CAPI's MachinePool controller reads it),
// and AutoscalingActive reports who sizes the pool.
func TestPoolStatus(t *testing.T) {
	g := NewWithT(t)
	newPass := func(provisioned bool) *pass[*captfv1.TerraformMachinePool] {
		mp := &captfv1.TerraformMachinePool{}
		mp.Status.Initialization.Provisioned = ptr.To(provisioned)
		return &pass[*captfv1.TerraformMachinePool]{
			scope:  &reconcileScope[*captfv1.TerraformMachinePool]{Object: mp},
			status: &mp.Status.WorkspaceStatus, init: &mp.Status.Initialization,
		}
	}
	p := newPass(false)
	updateStatus(p, machinePoolKind{})
	g.Expect(p.scope.Object.Status.Ready).To(BeFalse())
	g.Expect(conditions.Get(p.scope.Object, captfv1.AutoscalingActiveCondition)).To(BeNil(), "nothing observed, nothing said")

	p = newPass(true)
	p.scaling = &poolScaling{reason: captfv1.ReplicasManagedByModuleReason, message: "m", bounds: &inputs.Autoscaling{Enabled: true, Max: 3}}
	updateStatus(p, machinePoolKind{})
	g.Expect(p.scope.Object.Status.Ready).To(BeTrue(), "ready once provisioned")
	c := conditions.Get(p.scope.Object, captfv1.AutoscalingActiveCondition)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(c.Reason).To(Equal(captfv1.ReplicasManagedByModuleReason))

	p.scaling = &poolScaling{reason: captfv1.ReplicasManagedExternallyReason, message: "m"}
	updateStatus(p, machinePoolKind{})
	c = conditions.Get(p.scope.Object, captfv1.AutoscalingActiveCondition)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(captfv1.ReplicasManagedExternallyReason))
	g.Expect(conditions.Get(p.scope.Object, captfv1.ReadyCondition).Status).To(Equal(metav1.ConditionUnknown),
		"AutoscalingActive is not part of Ready (health is unknown here)")
}
