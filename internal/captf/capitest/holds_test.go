package capitest_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/testenv/mgrtest"
)

// TestCAPIShowsWhatHoldsTheCluster (issue 25): a provisioned TerraformCluster whose change waits
// for approval is frozen: nothing applies until someone approves. Its infrastructure still works,
// so its Ready stays True, and Ready's message says what holds it; CAPI's Cluster controller
// mirrors that condition into the Cluster's InfrastructureReady, which is what `kubectl describe
// cluster` and `clusterctl describe cluster` show.
func TestCAPIShowsWhatHoldsTheCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := besideCAPI(t)

	cluster := testenv.Cluster(ns, "prod", "TerraformCluster", "prod")
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	tc := testenv.TerraformCluster(ns, "prod", "prod", "capx.test/modules/cluster:v1")
	g.Expect(env.Client.Create(ctx, tc)).To(Succeed())
	g.Eventually(func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)
		return ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false) &&
			conditions.IsTrue(cluster, clusterv1.ClusterInfrastructureReadyCondition), err
	}, 3*time.Minute, 250*time.Millisecond).Should(BeTrue(), "CAPI sees the infrastructure provisioned and ready")

	// A new network CIDR replaces the network: the destructive guard holds the change.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tc), tc)).To(Succeed())
	patch := client.MergeFrom(tc.DeepCopy())
	tc.Spec.Variables = map[string]apiextensionsv1.JSON{"network_cidr": {Raw: []byte(`"10.9.0.0/16"`)}}
	g.Expect(env.Client.Patch(ctx, tc, patch)).To(Succeed())
	mgrtest.WaitFor(t, env, tc, 3*time.Minute, "the change held", func(o *captfv1.TerraformCluster) bool {
		c := conditions.Get(o, captfv1.ApplyJobSucceededCondition)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == captfv1.DestructivePlanBlockedReason
	})

	var mirrored *metav1.Condition
	g.Eventually(func() (string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)
		if mirrored = conditions.Get(cluster, clusterv1.ClusterInfrastructureReadyCondition); mirrored == nil {
			return "", err
		}
		return mirrored.Message, err
	}, time.Minute, 250*time.Millisecond).Should(And(
		ContainSubstring("Changes are held (DestructivePlanBlocked)"),
		ContainSubstring("kubectl captf approve")),
		"the Cluster's InfrastructureReady says what holds its infrastructure")
	g.Expect(mirrored.Status).To(Equal(metav1.ConditionTrue), "the infrastructure still works")
}
