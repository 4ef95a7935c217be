package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/testenv"
)

// TestVariablesSourcesAreWatched: an object waiting for its variablesFrom source has no
// requeue; creating the source, and then fixing it, each bring the object back at once.
func TestVariablesSourcesAreWatched(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t)
	startManagerIn(t, ns)

	cluster := testenv.Cluster(ns, "prod", "TerraformCluster", "prod")
	create(t, cluster)
	tc := testenv.TerraformCluster(ns, "prod", "prod", clusterImage)
	tc.Spec.VariablesFrom = []captfv1.VariablesSource{{ConfigMapRef: &corev1.LocalObjectReference{Name: "prod-vars"}}}
	ownedBy(tc, cluster, "Cluster")
	create(t, tc)
	dependencies := func(reason string) func(*captfv1.TerraformCluster) bool {
		return func(o *captfv1.TerraformCluster) bool {
			c := conditions.Get(o, captfv1.DependenciesReadyCondition)
			return c != nil && c.Reason == reason
		}
	}
	waitFor(t, tc, time.Minute, "waiting for its variables source", dependencies(captfv1.VariablesSourceNotFoundReason))

	// The source appears, with a key the contract reserves.
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod-vars", Labels: map[string]string{captfv1.VariablesLabel: "true"}},
		Data:       map[string]string{"count": "3"},
	}
	create(t, cm)
	waitFor(t, tc, 30*time.Second, "refusing the reserved key", dependencies(captfv1.VariablesInvalidReason))

	// The fix applies.
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			return err
		}
		cm.Data = map[string]string{"endpoint_host": "192.0.2.20"}
		return env.Client.Update(ctx, cm)
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	waitFor(t, tc, 2*time.Minute, "provisioned with the fixed variables", func(o *captfv1.TerraformCluster) bool {
		return provisioned(o.Status.Initialization)
	})
	g.Expect(tc.Spec.ControlPlaneEndpoint.Host).To(Equal("192.0.2.20"))
}
