package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
)

// The destructive-plan guard at the controller, for the kinds the runner-level tests cover
// only there. The test modules' provisioner_fails makes a first apply fail midway: its resource
// is created, its provisioner fails, and OpenTofu keeps it tainted, so the next apply replaces
// it. That replace is held at the controller until its TerraformPlan is approved.

// guarded is one kind's part of a guard scenario.
type guarded[T capi.Object] struct {
	kind string
	obj  T
	// provisioned reads the object's provisioned status.
	provisioned func(T) bool
}

// failsSource is a variables source setting provisioner_fails (a machine's own variables are
// immutable; what its sources say is read until it is provisioned).
func failsSource(t *testing.T, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{captfv1.VariablesLabel: "true"}},
		Data:       map[string]string{"provisioner_fails": "true"},
	}
	create(t, cm)
	return cm
}

func fromSource(cm *corev1.ConfigMap) []captfv1.VariablesSource {
	return []captfv1.VariablesSource{{ConfigMapRef: &corev1.LocalObjectReference{Name: cm.Name}, Format: captfv1.VariablesFormatJSON}}
}

func checkGuard[T capi.Object](t *testing.T, ns string, cm *corev1.ConfigMap, c guarded[T]) {
	g := NewWithT(t)
	name := c.obj.GetName()
	waitFor(t, c.obj, 2*time.Minute, "the first apply failed midway", func(o T) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionFalse, captfv1.ApplyFailedReason)
	})
	before := readState(t, ns, c.kind, name)
	g.Expect(before.Resources).To(BeNumerically(">", 0), "the failed apply created resources")

	// New inputs: the retry plans to replace the tainted resource, which the guard holds.
	update(t, cm, func(o *corev1.ConfigMap) { o.Data["provisioner_fails"] = "false" })
	var plan captfv1.TerraformPlan
	waitFor(t, c.obj, 2*time.Minute, "the replace held", func(o T) bool {
		if !hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionFalse, captfv1.DestructivePlanBlockedReason) {
			return false
		}
		for _, tp := range plansOf(t, ns) {
			if tp.Spec.TargetRef.Kind == c.kind && tp.Spec.TargetRef.Name == name && tp.Labels[captfv1.PlanPhaseLabel] == string(captfv1.PlanPending) {
				plan = tp
				return true
			}
		}
		return false
	})
	g.Expect(plan.Spec.Reason).To(Equal(captfv1.PlanReasonDestructive))
	g.Expect(plan.Spec.Summary.Replace).To(BeEquivalentTo(1))
	g.Expect(plan.Labels).To(HaveKeyWithValue(captfv1.DestructiveLabel, "true"))
	applies := countJobs(t, ns, c.kind, name, captfv1.OperationApply)
	g.Expect(applies).To(Equal(2), "the failed apply and the guarded one")
	never(t, 4*time.Second, "an apply ran or the state changed before the approval", func() bool {
		return countJobs(t, ns, c.kind, name, captfv1.OperationApply) != applies || readState(t, ns, c.kind, name).Serial != before.Serial
	})
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(c.obj), c.obj)).To(Succeed())
	g.Expect(c.provisioned(c.obj)).To(BeFalse())

	// Approved, the replace applies.
	approve(t, &plan, "alice")
	waitFor(t, c.obj, 2*time.Minute, "the approved replace applied", func(o T) bool {
		return c.provisioned(o) && hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionTrue, captfv1.ApplySucceededReason)
	})
	g.Expect(readState(t, ns, c.kind, name).Serial).To(BeNumerically(">", before.Serial))
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(&plan), &plan)).To(Succeed())
	g.Expect(plan.Labels[captfv1.PlanPhaseLabel]).To(Equal(string(captfv1.PlanApplied)))
}

// TestGuardMachine: a TerraformMachine's destructive retry is held at the controller
// (DestructivePlanBlocked, a Pending TerraformPlan, no apply, the state unchanged) and applies
// once approved.
func TestGuardMachine(t *testing.T) {
	ns, _ := scenario(t)
	newForeignCluster(t, ns, "c")
	cm := failsSource(t, ns, "m1-vars")
	tm := newTerraformMachine(t, ns, "c", "m1", func(o *captfv1.TerraformMachine) { o.Spec.VariablesFrom = fromSource(cm) })
	checkGuard(t, ns, cm, guarded[*captfv1.TerraformMachine]{kind: captfv1.KindMachine, obj: tm,
		provisioned: func(o *captfv1.TerraformMachine) bool { return provisioned(o.Status.Initialization) }})
}

// TestGuardMachinePool: the same for a TerraformMachinePool.
func TestGuardMachinePool(t *testing.T) {
	ns, _ := scenario(t)
	newForeignCluster(t, ns, "c")
	cm := failsSource(t, ns, "workers-vars")
	_, tmp := newPool(t, ns, "c", "workers", 2, func(o *captfv1.TerraformMachinePool) { o.Spec.VariablesFrom = fromSource(cm) })
	checkGuard(t, ns, cm, guarded[*captfv1.TerraformMachinePool]{kind: captfv1.KindMachinePool, obj: tmp,
		provisioned: func(o *captfv1.TerraformMachinePool) bool { return provisioned(o.Status.Initialization) }})
}
