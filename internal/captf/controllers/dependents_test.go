package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/cluster-api/util/conditions"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/testenv"
)

// TestClusterDeletionFollowsItsDependents: a deleting TerraformCluster waits for its machines
// and pools, and goes on as soon as the last one is gone, not at its next recheck a minute
// later.
func TestClusterDeletionFollowsItsDependents(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t)
	startManagerIn(t, ns)

	cluster := testenv.Cluster(ns, "prod", "TerraformCluster", "prod")
	create(t, cluster)
	tc := testenv.TerraformCluster(ns, "prod", "prod", clusterImage)
	ownedBy(tc, cluster, "Cluster")
	create(t, tc)
	waitFor(t, tc, 3*time.Minute, "provisioned", func(o *captfv1.TerraformCluster) bool { return provisioned(o.Status.Initialization) })

	// A pool of the cluster whose MachinePool never came: it holds the cluster's deletion.
	tmp := testenv.TerraformMachinePool(ns, "workers", "prod", poolImage)
	create(t, tmp)
	g.Expect(env.Client.Delete(ctx, tc)).To(Succeed())
	waitFor(t, tc, time.Minute, "deletion blocked by the pool", func(o *captfv1.TerraformCluster) bool {
		return conditions.IsTrue(o, captfv1.DeletionBlockedCondition)
	})

	// The recheck of a blocked deletion is a minute away; the pool's deletion brings the
	// cluster back well before it.
	g.Expect(env.Client.Delete(ctx, tmp)).To(Succeed())
	gone(t, tmp, 30*time.Second)
	gone(t, tc, 30*time.Second)
}
