package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// TestClusterUpAndTeardownLeavesNothing: 3 control planes, 2 workers and 1 GPU worker come up
// under CAPI's own controllers; deleting the Cluster leaves nothing in the simulator: no
// cloudspace, VM, disk, load balancer, pool, DNS record, link, recycle-bin entry or billed vGPU.
func TestClusterUpAndTeardownLeavesNothing(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	g := NewWithT(t)
	ctx := context.Background()
	cluster, vc := h.cluster("prod", func(vc *capvcov1.VCOCluster) {
		vc.Spec.DNS = &capvcov1.DNSSpec{Name: "api.prod.example.com"}
	})

	// Nothing is claimed before it exists: the first status the controller writes is not Ready.
	waitFor(h, vc, time.Minute, "conditions", func(vc *capvcov1.VCOCluster) bool { return len(vc.Status.Conditions) > 0 })
	if provisionedCluster(vc) {
		g.Expect(vc.Status.Cloudspaces).NotTo(BeEmpty(), "provisioned without a cloudspace")
	}
	waitFor(h, vc, time.Minute, "provisioned", provisionedCluster)
	g.Expect(conditions.IsTrue(vc, capvcov1.ReadyCondition)).To(BeTrue())
	g.Expect(vc.Status.Cloudspaces).To(HaveLen(1))
	cs := vc.Status.Cloudspaces[0]
	g.Expect(cs.Name).To(Equal("capvco_" + h.ns + "_prod_primary"))
	g.Expect(cs.Adopted).To(BeFalse())
	g.Expect(vc.Spec.ControlPlaneEndpoint).To(Equal(clusterv1.APIEndpoint{Host: "api.prod.example.com", Port: 6443}))
	g.Expect(vc.Status.DNS).To(Equal(&capvcov1.DNSStatus{Name: "api.prod.example.com", Published: true, TTLSeconds: 3600}))
	g.Expect(vc.Status.LoadBalancer).NotTo(BeNil())
	g.Expect(vc.Status.LoadBalancer.Address).To(Equal(cs.ExternalIP))
	g.Expect(vc.Status.FailureDomains).To(HaveLen(1))
	waitFor(h, cluster, time.Minute, "CAPI sees the infrastructure", func(c *clusterv1.Cluster) bool {
		return ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false)
	})

	var machines []*capvcov1.VCOMachine
	for i := range 3 {
		machines = append(machines, h.machine("prod", fmt.Sprintf("cp-%d", i), true, nil))
	}
	for i := range 2 {
		machines = append(machines, h.machine("prod", fmt.Sprintf("md-%d", i), false, nil))
	}
	machines = append(machines, h.machine("prod", "gpu-0", false, func(m *capvcov1.VCOMachine, _ *clusterv1.Machine) {
		m.Spec.GPU = &capvcov1.GPUSpec{Vendor: "nvidia"}
	}))
	var cpIPs []string
	for _, m := range machines {
		waitFor(h, m, 2*time.Minute, "provisioned", provisionedMachine)
		g.Expect(m.Spec.ProviderID).To(MatchRegexp(`^vco://` + vcosim.SeedLocation + `/\d+$`))
		g.Expect(m.Status.FailureDomain).To(Equal("primary"))
		g.Expect(m.Status.Addresses).To(ContainElement(HaveField("Type", clusterv1.MachineInternalIP)))
		g.Expect(conditions.IsTrue(m, capvcov1.ReadyCondition)).To(BeTrue())
		if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; cp {
			for _, a := range m.Status.Addresses {
				if a.Type == clusterv1.MachineInternalIP {
					cpIPs = append(cpIPs, a.Address)
				}
			}
		}
	}
	gpuM := machines[5]
	g.Expect(gpuM.Status.GPUs).To(HaveLen(1))
	g.Expect(gpuM.Status.GPUs[0].Name).To(Equal("capvco_" + h.ns + "_prod_gpu-0_gpu_0"))
	g.Expect(gpuM.Status.GPUs[0].Attached).To(BeTrue())

	// The VMs carry the bootstrap data as cloud-init, and CAPI took the provider IDs.
	snap := h.sim.Snapshot()
	for _, v := range snap.VMs {
		g.Expect(v.UserData).To(Equal("#cloud-config\nhostname: " + v.Name + "\n"))
		g.Expect(v.Hostname).To(Equal(v.Name))
	}
	g.Expect(snap.VMs).To(HaveLen(6))
	m0 := &clusterv1.Machine{}
	m0.Namespace, m0.Name = h.ns, "cp-0"
	g.Eventually(func() string { _ = h.get(m0); return m0.Spec.ProviderID }, time.Minute, 100*time.Millisecond).Should(Equal(machines[0].Spec.ProviderID))

	// The three control planes answer, so they are the pool's members.
	slices.Sort(cpIPs)
	waitFor(h, vc, time.Minute, "3 members", func(vc *capvcov1.VCOCluster) bool {
		return vc.Status.LoadBalancer != nil && slices.Equal(vc.Status.LoadBalancer.Members, cpIPs)
	})

	g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	h.waitGone(vc, 3*time.Minute)
	h.waitGone(cluster, time.Minute)
	h.assertNothingLeft(nil)
	t.Logf("platform clients requested: %d", h.factory.calls.Load())
}
