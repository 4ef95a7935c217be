package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/testenv"
)

// TestMachinePoolScaling: a pool scales down without an approval (the deletions only follow
// the lower replica count); with the autoscaler size annotations the module sizes the pool, and
// CAPTF claims the MachinePool's replicas and writes the observed count back; a foreign manager
// of the replicas is followed and never overwritten.
func TestMachinePoolScaling(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t)
	startManagerIn(t, ns)

	cluster := testenv.Cluster(ns, "prod", "TerraformCluster", "prod")
	create(t, cluster)
	tc := testenv.TerraformCluster(ns, "prod", "prod", clusterImage)
	ownedBy(tc, cluster, "Cluster")
	create(t, tc, testenv.BootstrapSecret(ns, "workers-bootstrap", "prod", "#cloud-config\n"))
	mp := testenv.MachinePool(ns, "workers", "prod", "TerraformMachinePool", "workers", "workers-bootstrap", 3)
	create(t, mp)
	tmp := testenv.TerraformMachinePool(ns, "workers", "prod", poolImage)
	ownedBy(tmp, mp, "MachinePool")
	create(t, tmp)

	waitFor(t, tmp, 3*time.Minute, "provisioned with 3 instances", func(o *captfv1.TerraformMachinePool) bool {
		return provisioned(o.Status.Initialization) && len(o.Spec.ProviderIDList) == 3 && o.Status.Replicas == 3
	})
	g.Expect(tmp.Status.Ready).To(BeTrue(), "status.ready, which CAPI's MachinePool controller reads")
	c := conditions.Get(tmp, captfv1.AutoscalingActiveCondition)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Reason).To(Equal(captfv1.AutoscalingDisabledReason))

	patchPool := func(change func(*clusterv1.MachinePool)) {
		t.Helper()
		g.Eventually(func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp); err != nil {
				return err
			}
			before := mp.DeepCopy()
			change(mp)
			return env.Client.Patch(ctx, mp, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	}

	// 3 -> 2: the apply deletes instance[2] without waiting for an approval.
	patchPool(func(p *clusterv1.MachinePool) { p.Spec.Replicas = ptr.To[int32](2) })
	waitFor(t, tmp, 3*time.Minute, "scaled down to 2 without an approval", func(o *captfv1.TerraformMachinePool) bool {
		if c := conditions.Get(o, captfv1.ApplyJobSucceededCondition); c != nil && c.Reason == captfv1.DestructivePlanBlockedReason {
			t.Fatalf("the scale-down waits for an approval: %s", c.Message)
		}
		return len(o.Spec.ProviderIDList) == 2 && o.Status.Replicas == 2
	})
	plans := &captfv1.TerraformPlanList{}
	g.Expect(env.Client.List(ctx, plans, client.InNamespace(ns))).To(Succeed())
	g.Expect(plans.Items).To(BeEmpty(), "a scale-down creates no plan to approve")

	// Autoscaling between 3 and 5: the module renders the observed 2 clamped to 3, CAPTF claims
	// the MachinePool's replicas and writes the observed count back.
	patchPool(func(p *clusterv1.MachinePool) {
		p.Annotations = map[string]string{clusterv1.AutoscalerMinSizeAnnotation: "3", clusterv1.AutoscalerMaxSizeAnnotation: "5"}
	})
	waitFor(t, tmp, 3*time.Minute, "autoscaling to its minimum of 3", func(o *captfv1.TerraformMachinePool) bool {
		return conditions.IsTrue(o, captfv1.AutoscalingActiveCondition) && o.Status.Replicas == 3 && len(o.Spec.ProviderIDList) == 3
	})
	g.Eventually(func() (map[string]any, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp)
		return map[string]any{"by": mp.Annotations[clusterv1.ReplicasManagedByAnnotation], "replicas": ptr.Deref(mp.Spec.Replicas, -1)}, err
	}, time.Minute, 200*time.Millisecond).Should(Equal(map[string]any{"by": "captf", "replicas": int32(3)}),
		"the MachinePool is claimed and carries the observed replicas")

	// A foreign manager takes the replicas and sizes the pool at 1: CAPTF follows it (the
	// scale-down needs no approval either) and never writes the observed 3 back.
	patchPool(func(p *clusterv1.MachinePool) {
		p.Annotations[clusterv1.ReplicasManagedByAnnotation] = "external-autoscaler"
		p.Spec.Replicas = ptr.To[int32](1)
	})
	waitFor(t, tmp, 3*time.Minute, "following the foreign manager down to 1", func(o *captfv1.TerraformMachinePool) bool {
		c := conditions.Get(o, captfv1.AutoscalingActiveCondition)
		return c != nil && c.Reason == captfv1.ReplicasManagedExternallyReason && o.Status.Replicas == 1 && len(o.Spec.ProviderIDList) == 1
	})
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp)).To(Succeed())
	g.Expect(mp.Annotations).To(HaveKeyWithValue(clusterv1.ReplicasManagedByAnnotation, "external-autoscaler"))
	g.Expect(mp.Spec.Replicas).To(Equal(ptr.To[int32](1)), "the foreign manager's replicas stand")
}
