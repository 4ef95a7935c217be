package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/testenv"
)

// TestRotatedBootstrapReachesThePool (issue 23 item 2): a pool whose membership refresh is a
// day away re-renders as soon as its bootstrap Secret is rotated in place (same name, new
// data, as CAPI's bootstrap providers rotate a join token). Nothing else changes and no refresh
// Job runs, so the apply of the new inputs can only come from the Secret's watch bringing the
// pool back.
func TestRotatedBootstrapReachesThePool(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t)
	startManagerIn(t, ns)

	cluster := testenv.Cluster(ns, "prod", "TerraformCluster", "prod")
	create(t, cluster)
	tc := testenv.TerraformCluster(ns, "prod", "prod", clusterImage)
	ownedBy(tc, cluster, "Cluster")
	secret := testenv.BootstrapSecret(ns, "workers-bootstrap", "prod", "#cloud-config\ntoken: abcdef.0123456789abcdef\n")
	create(t, tc, secret)
	mp := testenv.MachinePool(ns, "workers", "prod", "TerraformMachinePool", "workers", "workers-bootstrap", 2)
	create(t, mp)
	tmp := testenv.TerraformMachinePool(ns, "workers", "prod", poolImage)
	tmp.Spec.MembershipRefreshIntervalSeconds = ptr.To[int32](86400)
	ownedBy(tmp, mp, "MachinePool")
	create(t, tmp)

	waitFor(t, tmp, 3*time.Minute, "provisioned with 2 instances", func(o *captfv1.TerraformMachinePool) bool {
		return provisioned(o.Status.Initialization) && o.Status.Replicas == 2 && o.Status.AppliedInputsHash != "" && o.Status.ActiveJob == nil
	})
	applied := tmp.Status.AppliedInputsHash
	applies := len(jobsOfOperation(t, ns, "workers", captfv1.OperationApply))
	refreshes := jobsOfOperation(t, ns, "workers", captfv1.OperationRefresh)

	// The token is rotated in place.
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
			return err
		}
		secret.Data["value"] = []byte("#cloud-config\ntoken: ghijkl.0123456789abcdef\n")
		return env.Client.Update(ctx, secret)
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())

	waitFor(t, tmp, 3*time.Minute, "applied with the rotated bootstrap data", func(o *captfv1.TerraformMachinePool) bool {
		return o.Status.AppliedInputsHash != "" && o.Status.AppliedInputsHash != applied && o.Status.ActiveJob == nil
	})
	g.Expect(tmp.Status.LastRun).NotTo(BeNil())
	g.Expect(tmp.Status.LastRun.Operation).To(Equal(captfv1.OperationApply))
	g.Expect(tmp.Status.LastRun.Changes).To(Equal(&captfv1.ChangeCounts{Change: 1}), "the group resource takes the new bootstrap digest, nothing is replaced")
	g.Expect(jobsOfOperation(t, ns, "workers", captfv1.OperationApply)).To(HaveLen(applies+1), "one apply of the new inputs")
	g.Expect(jobsOfOperation(t, ns, "workers", captfv1.OperationRefresh)).To(Equal(refreshes), "no membership refresh ran: the watch brought the pool back")
}

// jobsOfOperation lists a pool's Jobs of one operation.
func jobsOfOperation(t *testing.T, ns, name string, op captfv1.Operation) []string {
	t.Helper()
	var names []string
	for _, j := range jobsOf(t, ns, captfv1.KindMachinePool, name) {
		if j.Labels[captfv1.OperationLabel] == string(op) {
			names = append(names, j.Name)
		}
	}
	return names
}
