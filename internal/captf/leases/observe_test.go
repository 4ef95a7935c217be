package leases

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
)

// TestObserve: the read-only view the decision weighs before act takes the leases. It writes
// nothing, reports a run lease only while its holder Job exists, a held cluster lease to the
// members and the members' mutating Jobs to the cluster, and nothing of the gate without it.
func TestObserve(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	f := newFixture(t)
	c := f.object(captfv1.KindCluster, "c1")
	m := f.object(captfv1.KindMachine, "m1")
	p := f.object(captfv1.KindMachinePool, "p1")

	obs, err := f.leases.Observe(ctx, m, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(obs).To(Equal(Observation{}), "nothing held")

	// The machine's own start took its run lease but its Job does not exist: Take resumes or
	// takes it over, so the observation does not hold the start back.
	g.Expect(f.leases.Take(ctx, req(m, "m1-apply", contract.OpApply))).To(BeNil())
	obs, err = f.leases.Observe(ctx, m, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(obs.Run).To(BeNil())
	// Its Job exists (the Job list of the pass had not shown it): the run lease holds.
	f.job("m1-apply")
	obs, err = f.leases.Observe(ctx, m, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(obs.Run).To(Equal(&Wait{Reason: "WaitingForRunLease", Holders: []string{"m1-apply"},
		Message: "Waiting for Job m1-apply, which holds Lease " + RunLeaseName(m) + ", to finish"}))

	// The cluster sees its member's mutating Job; ungated it sees nothing of the gate.
	obs, err = f.leases.Observe(ctx, c, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(obs.Members).NotTo(BeNil())
	g.Expect(obs.Members.Holders).To(Equal([]string{"m1-apply"}))
	obs, err = f.leases.Observe(ctx, c, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(obs).To(Equal(Observation{}))

	// A cluster holding its operation lease holds the pool back.
	g.Expect(f.leases.Release(ctx, m, "m1-apply")).To(Succeed())
	g.Expect(f.leases.Take(ctx, req(c, "c1-apply", contract.OpApply))).To(BeNil())
	f.takeWrites()
	obs, err = f.leases.Observe(ctx, p, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(obs.Cluster).To(Equal(&Wait{Reason: "WaitingForClusterOperation", Holders: []string{"c1-apply"},
		Message: "Waiting for the TerraformCluster's Job c1-apply to finish (Lease " + ClusterLeaseName(f.ns, "c1") + ")"}))
	g.Expect(obs.Run).To(BeNil())
	g.Expect(f.takeWrites()).To(BeEmpty(), "observing writes nothing")
}
