package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/testenv"
)

// TestEndpointChangeIsReported: the endpoint the module chose is written once; when a later
// apply makes the module report another one, spec keeps the first and OutputsValid says so.
func TestEndpointChangeIsReported(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t)
	startManagerIn(t, ns)

	cluster := testenv.Cluster(ns, "prod", "TerraformCluster", "prod")
	create(t, cluster)
	tc := testenv.TerraformCluster(ns, "prod", "prod", clusterImage)
	tc.Spec.Variables = map[string]apiextensionsv1.JSON{"endpoint_host": {Raw: []byte(`"192.0.2.10"`)}}
	ownedBy(tc, cluster, "Cluster")
	create(t, tc)
	waitFor(t, tc, 3*time.Minute, "provisioned", func(o *captfv1.TerraformCluster) bool { return provisioned(o.Status.Initialization) })
	first := clusterv1.APIEndpoint{Host: "192.0.2.10", Port: 6443}
	g.Expect(tc.Spec.ControlPlaneEndpoint).To(Equal(first))
	g.Expect(conditions.IsTrue(tc, captfv1.OutputsValidCondition)).To(BeTrue(), describe(tc))

	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tc), tc); err != nil {
			return err
		}
		before := tc.DeepCopy()
		tc.Spec.Variables["endpoint_host"] = apiextensionsv1.JSON{Raw: []byte(`"192.0.2.99"`)}
		return env.Client.Patch(ctx, tc, client.MergeFrom(before))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	waitFor(t, tc, 2*time.Minute, "reporting the moved endpoint", func(o *captfv1.TerraformCluster) bool {
		c := conditions.Get(o, captfv1.OutputsValidCondition)
		return c != nil && c.Reason == captfv1.ControlPlaneEndpointChangedReason
	})
	g.Expect(tc.Spec.ControlPlaneEndpoint).To(Equal(first), "spec keeps the endpoint the Cluster uses")
	c := conditions.Get(tc, captfv1.OutputsValidCondition)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Message).To(ContainSubstring("192.0.2.99:6443"))
	g.Expect(conditions.IsTrue(tc, captfv1.ReadyCondition)).To(BeTrue(), "a provisioned cluster stays Ready: the Cluster still reaches 192.0.2.10")
}
