package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/leases"
)

// TestClusterOperationGate: under the gate (the default) a TerraformCluster's apply waits for
// its machine's running apply (WaitingForMachineOperations) and claims the cluster lease while it
// waits, so a machine created meanwhile waits for the cluster (WaitingForClusterOperation:
// writers are preferred); a cluster Job and a machine Job never run at once, and both changes
// land. The waits are decided by decide.Next from the leases read before the start.
func TestClusterOperationGate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := scenario(t)
	tc := newTerraformCluster(t, ns, "c1", nil)
	waitFor(t, tc, 2*time.Minute, "provisioned", func(o *captfv1.TerraformCluster) bool {
		return provisioned(o.Status.Initialization) && o.Status.ActiveJob == nil
	})
	overlap := watchOverlap(t, ns)

	m1 := newTerraformMachine(t, ns, "c1", "m1", func(o *captfv1.TerraformMachine) { o.Spec.Variables = vars(map[string]any{"slow": 8}) })
	waitFor(t, m1, time.Minute, "its apply running", func(o *captfv1.TerraformMachine) bool { return o.Status.ActiveJob != nil })
	applied := tc.Status.AppliedInputsHash
	update(t, tc, func(o *captfv1.TerraformCluster) { o.Spec.Variables = vars(map[string]any{"endpoint_port": 7443}) })
	waitFor(t, tc, time.Minute, "waiting for the machine's Job", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionUnknown, captfv1.WaitingForMachineOperationsReason)
	})
	g.Expect(describe(tc)).To(ContainSubstring("m1"), "the wait names the machine's Job")
	lease := &coordinationv1.Lease{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: leases.ClusterLeaseName(ns, "c1")}, lease)).To(Succeed(),
		"the waiting cluster holds the cluster lease")
	holder, ours := jobs.ParseName(ptr.Deref(lease.Spec.HolderIdentity, ""))
	g.Expect(ours && holder.IsFor(captfv1.KindCluster, "c1")).To(BeTrue(), "held for the cluster's apply: %v", lease.Spec.HolderIdentity)

	m2 := newTerraformMachine(t, ns, "c1", "m2", nil)
	waitFor(t, m2, time.Minute, "waiting for the cluster", func(o *captfv1.TerraformMachine) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionUnknown, captfv1.WaitingForClusterOperationReason)
	})

	waitFor(t, tc, 3*time.Minute, "the change applied", func(o *captfv1.TerraformCluster) bool {
		return o.Status.ActiveJob == nil && o.Status.AppliedInputsHash != applied &&
			hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionTrue, captfv1.ApplySucceededReason)
	})
	for _, m := range []*captfv1.TerraformMachine{m1, m2} {
		waitFor(t, m, 2*time.Minute, "provisioned", func(o *captfv1.TerraformMachine) bool { return provisioned(o.Status.Initialization) })
	}
	g.Expect(overlap()).To(BeFalse(), "a cluster Job and a machine Job ran at once")
}

// watchOverlap reports whether a cluster's Job and a machine's Job were ever seen running at
// once in the namespace, until the test ends.
func watchOverlap(t *testing.T, ns string) func() bool {
	return watchActiveJobs(t, ns, func(seen bool, running []batchv1.Job) bool {
		kinds := map[string]bool{}
		for _, j := range running {
			kinds[j.Labels[captfv1.OwnerKindLabel]] = true
		}
		return seen || (kinds[captfv1.KindCluster] && kinds[captfv1.KindMachine])
	})
}
