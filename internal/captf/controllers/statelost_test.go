package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
)

// TestStateLost: the state of an applied machine disappears. Nothing runs (an apply would build
// a second machine), and the conditions say so and what to do, also while the object is being
// deleted; deletionPolicy Retain then lets the deletion finish without a destroy.
func TestStateLost(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, kubelet := scenario(t)
	newForeignCluster(t, ns, "c")
	tm := newTerraformMachine(t, ns, "c", "m1", nil)
	waitFor(t, tm, 2*time.Minute, "provisioned and backed up", func(o *captfv1.TerraformMachine) bool {
		return provisioned(o.Status.Initialization) && len(o.Status.StateBackups) > 0 && o.Status.ActiveJob == nil
	})
	pods := kubelet.Started()

	base := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns,
		Name: contract.StateSecretName(contract.StateSuffix(ns, captfv1.KindMachine, "m1"))}}
	g.Expect(env.Client.Delete(ctx, base)).To(Succeed())
	waitFor(t, tm, time.Minute, "held on the lost state", func(o *captfv1.TerraformMachine) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionFalse, captfv1.StateLostReason) &&
			hasCondition(o, captfv1.StateReadableCondition, metav1.ConditionFalse, captfv1.StateNotFoundReason)
	})
	g.Expect(conditions.GetMessage(tm, captfv1.ApplyJobSucceededCondition)).To(ContainSubstring(captfv1.RestoreStateAnnotation))
	never(t, 3*time.Second, "a Job ran without the state", func() bool { return kubelet.Started() > pods })

	g.Expect(env.Client.Delete(ctx, tm)).To(Succeed())
	waitFor(t, tm, time.Minute, "the deletion held", func(o *captfv1.TerraformMachine) bool {
		c := conditions.Get(o, clusterv1.DeletingCondition)
		return c != nil && c.Status == metav1.ConditionTrue && len(c.Message) > 0 && c.Message[:5] == "Held:"
	})
	g.Expect(conditions.GetMessage(tm, clusterv1.DeletingCondition)).To(ContainSubstring("deletionPolicy: Retain"))
	never(t, 3*time.Second, "a destroy ran without the state", func() bool { return kubelet.Started() > pods })

	update(t, tm, func(o *captfv1.TerraformMachine) { o.Spec.DeletionPolicy = captfv1.DeletionPolicyRetain })
	gone(t, tm, time.Minute)
	g.Expect(kubelet.Started()).To(Equal(pods), "no Job at all")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(base), &corev1.Secret{})).NotTo(Succeed())
}
