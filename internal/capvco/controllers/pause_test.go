package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
)

// TestPausedNeverDestroys: while the Cluster is paused (as during clusterctl move), deleting the
// VCOCluster and a VCOMachine destroys nothing; unpaused, the teardown runs and leaves nothing.
func TestPausedNeverDestroys(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	g := NewWithT(t)
	ctx := context.Background()
	cluster, vc := h.cluster("moving", nil)
	waitFor(h, vc, time.Minute, "provisioned", provisionedCluster)
	m := h.machine("moving", "md-0", false, nil)
	waitFor(h, m, time.Minute, "provisioned", provisionedMachine)

	// A patch, not an update: CAPI's own controllers write the Cluster too.
	g.Expect(h.get(cluster)).To(Succeed())
	paused := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Paused = ptr.To(true)
	g.Expect(env.Client.Patch(ctx, cluster, paused)).To(Succeed())
	waitFor(h, vc, 30*time.Second, "Paused", func(vc *capvcov1.VCOCluster) bool { return conditions.IsTrue(vc, clusterv1.PausedCondition) })
	g.Expect(env.Client.Delete(ctx, m)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, vc)).To(Succeed())
	waitFor(h, m, 30*time.Second, "deletion waiting for unpause", func(m *capvcov1.VCOMachine) bool {
		c := conditions.Get(m, clusterv1.DeletingCondition)
		return c != nil && strings.Contains(c.Message, "unpaused")
	})
	waitFor(h, vc, 30*time.Second, "deletion waiting for unpause", func(vc *capvcov1.VCOCluster) bool {
		c := conditions.Get(vc, clusterv1.DeletingCondition)
		return c != nil && strings.Contains(c.Message, "unpaused")
	})
	if n, what := h.mutating(); n > 0 {
		// Everything before the pause was creation; count only deletes.
		for _, w := range what {
			g.Expect(w).NotTo(HavePrefix("DELETE"), "a paused object ran a destroy")
		}
	}
	for _, v := range h.sim.Snapshot().VMs {
		g.Expect(v.Status).To(Equal("RUNNING"))
	}

	g.Expect(h.get(cluster)).To(Succeed())
	unpaused := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Paused = ptr.To(false)
	g.Expect(env.Client.Patch(ctx, cluster, unpaused)).To(Succeed())
	h.waitGone(m, time.Minute)
	h.waitGone(vc, time.Minute)
	h.assertNothingLeft(nil)
	g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
}
