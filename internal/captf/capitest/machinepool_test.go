package capitest_test

import (
	"context"
	"sort"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/testenv/mgrtest"
)

// TestCAPIMachinePool: with CAPI's core controllers running, a MachinePool whose
// infrastructure is a TerraformMachinePool is provisioned: CAPI's MachinePool controller
// takes the provider IDs into its spec.providerIDList and the replicas into status.replicas,
// and follows the pool as it scales up and down (a scale-down needs no approval) and as the
// module autoscales, its observed replicas written back into the MachinePool. The
// workload cluster CAPI connects to (for Nodes) is the test API server itself.
func TestCAPIMachinePool(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := besideCAPI(t)

	cluster := testenv.Cluster(ns, "prod", "TerraformCluster", "prod")
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	tc := testenv.TerraformCluster(ns, "prod", "prod", "capx.test/modules/cluster:v1")
	tc.Spec.Variables = map[string]apiextensionsv1.JSON{"endpoint_host": {Raw: []byte(`"192.0.2.10"`)}}
	g.Expect(env.Client.Create(ctx, tc)).To(Succeed())
	g.Expect(env.Client.Create(ctx, kubeconfigSecret(t, ns, "prod"))).To(Succeed())

	g.Expect(env.Client.Create(ctx, testenv.BootstrapSecret(ns, "workers-bootstrap", "prod", "#cloud-config\n"))).To(Succeed())
	mp := testenv.MachinePool(ns, "workers", "prod", "TerraformMachinePool", "workers", "workers-bootstrap", 2)
	mp.Spec.Template.Spec.Version = "v1.36.3"
	g.Expect(env.Client.Create(ctx, mp)).To(Succeed())
	tmp := testenv.TerraformMachinePool(ns, "workers", "prod", "capx.test/modules/machinepool:v1")
	g.Expect(env.Client.Create(ctx, tmp)).To(Succeed())

	// What CAPI's MachinePool controller made of the pool, once it matches the TerraformMachinePool.
	follows := func(replicas int, what string) {
		t.Helper()
		mgrtest.WaitFor(t, env, tmp, 3*time.Minute, what, func(o *captfv1.TerraformMachinePool) bool {
			return ptr.Deref(o.Status.Initialization.Provisioned, false) && len(o.Spec.ProviderIDList) == replicas && o.Status.Replicas == int32(replicas)
		})
		g.Expect(tmp.Status.Ready).To(BeTrue())
		g.Eventually(func() (map[string]any, error) {
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp)
			ids := append([]string(nil), mp.Spec.ProviderIDList...)
			sort.Strings(ids)
			return map[string]any{
				"infrastructureProvisioned": ptr.Deref(mp.Status.Initialization.InfrastructureProvisioned, false),
				"providerIDList":            ids,
				"replicas":                  ptr.Deref(mp.Status.Replicas, -1),
			}, err
		}, 2*time.Minute, 250*time.Millisecond).Should(Equal(map[string]any{
			"infrastructureProvisioned": true,
			"providerIDList":            tmp.Spec.ProviderIDList,
			"replicas":                  int32(replicas),
		}), "%s: the MachinePool takes the pool's provider IDs and replicas", what)
	}
	follows(2, "provisioned with 2 instances")
	g.Expect(mp.Spec.ProviderIDList).To(HaveEach(HavePrefix("capx-test:///workers-")))
	g.Expect(tmp.OwnerReferences).To(ContainElement(HaveField("Kind", "MachinePool")), "CAPI's MachinePool controller owns the pool")

	scale := func(replicas int32) {
		t.Helper()
		g.Eventually(func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp); err != nil {
				return err
			}
			before := mp.DeepCopy()
			mp.Spec.Replicas = ptr.To(replicas)
			return env.Client.Patch(ctx, mp, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	}
	scale(3)
	follows(3, "scaled up to 3")
	scale(1)
	follows(1, "scaled down to 1 without an approval")

	// The module's own autoscaling between 2 and 4: CAPTF claims the MachinePool's replicas and
	// writes back what the pool has (the 1 clamped up to 2), and CAPI follows.
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp); err != nil {
			return err
		}
		before := mp.DeepCopy()
		mp.Annotations = map[string]string{clusterv1.AutoscalerMinSizeAnnotation: "2", clusterv1.AutoscalerMaxSizeAnnotation: "4"}
		return env.Client.Patch(ctx, mp, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	follows(2, "autoscaled to its minimum of 2")
	g.Eventually(func() (map[string]any, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp)
		return map[string]any{"by": mp.Annotations[clusterv1.ReplicasManagedByAnnotation], "replicas": ptr.Deref(mp.Spec.Replicas, -1)}, err
	}, time.Minute, 250*time.Millisecond).Should(Equal(map[string]any{"by": "captf", "replicas": int32(2)}),
		"the MachinePool's replicas are CAPTF's and carry the observed count")
}
