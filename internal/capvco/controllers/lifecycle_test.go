package controllers_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/gpuname"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

func internalIPOf(m *capvcov1.VCOMachine) string {
	for _, a := range m.Status.Addresses {
		if a.Type == clusterv1.MachineInternalIP {
			return a.Address
		}
	}
	return ""
}

func (h *harness) poolHosts() []string {
	var out []string
	for _, p := range h.sim.Snapshot().ServerPools {
		for _, host := range p.Hosts {
			out = append(out, host.Address)
		}
	}
	slices.Sort(out)
	return out
}

// TestLoadBalancerMembershipFollowsHealth: a control plane whose API server stops answering
// leaves the server pool and returns when it answers again; a deleted one leaves on its deletion,
// not on a probe. How soon a probe's answer counts (one health-check interval) is decide's rule
// (TestPoolDelta and TestProbeSet in internal/capvco/decide, the probe in internal/capvco/health): this test asserts what the pool does, with time
// enough for a loaded machine, and logs how long it took.
func TestLoadBalancerMembershipFollowsHealth(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	g := NewWithT(t)
	_, vc := h.cluster("web", nil)
	waitFor(h, vc, time.Minute, "provisioned", provisionedCluster)
	h.servers.setDown("", false)
	a := h.machine("web", "cp-a", true, nil)
	b := h.machine("web", "cp-b", true, nil)
	waitFor(h, a, time.Minute, "provisioned", provisionedMachine)
	waitFor(h, b, time.Minute, "provisioned", provisionedMachine)
	ipA, ipB := internalIPOf(a), internalIPOf(b)
	both := []string{ipA, ipB}
	slices.Sort(both)
	waitFor(h, vc, time.Minute, "both members", func(vc *capvcov1.VCOCluster) bool {
		return slices.Equal(vc.Status.LoadBalancer.Members, both)
	})
	g.Expect(h.poolHosts()).To(Equal(both))

	interval := time.Duration(vc.Spec.ControlPlaneLoadBalancer.HealthCheckIntervalSeconds) * time.Second
	h.servers.setDown(ipA, true)
	start := time.Now()
	g.Eventually(h.poolHosts, time.Minute, 100*time.Millisecond).Should(Equal([]string{ipB}), "the silent API server leaves the pool")
	t.Logf("left the pool after %s (interval %s)", time.Since(start).Round(100*time.Millisecond), interval)
	waitFor(h, vc, time.Minute, "one member in status", func(vc *capvcov1.VCOCluster) bool {
		return slices.Equal(vc.Status.LoadBalancer.Members, []string{ipB})
	})

	h.servers.setDown(ipA, false)
	g.Eventually(h.poolHosts, time.Minute, 100*time.Millisecond).Should(Equal(both), "it returns when it answers again")

	// A deleted control plane leaves on its deletion, an event: with both API servers answering,
	// no probe would take it out.
	g.Expect(env.Client.Delete(context.Background(), b)).To(Succeed())
	g.Eventually(h.poolHosts, time.Minute, 100*time.Millisecond).Should(Equal([]string{ipA}))
}

// TestForceDeletedGPUMachineReleasedAtTeardown: a GPU VCOMachine force-deleted without its
// finalizer running leaves its VM and reservation behind; the cluster's teardown releases that
// reservation. A reservation renamed in the portal, a foreign one and another cluster's survive.
func TestForceDeletedGPUMachineReleasedAtTeardown(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	g := NewWithT(t)
	ctx := context.Background()
	cluster, vc := h.cluster("ml", nil)
	waitFor(h, vc, time.Minute, "provisioned", provisionedCluster)
	gpuSpec := func(m *capvcov1.VCOMachine, _ *clusterv1.Machine) {
		m.Spec.GPU = &capvcov1.GPUSpec{Vendor: "nvidia", Count: 2}
	}
	forced := h.machine("ml", "gpu-forced", false, gpuSpec)
	renamed := h.machine("ml", "gpu-renamed", false, gpuSpec)
	waitFor(h, forced, time.Minute, "provisioned", provisionedMachine)
	waitFor(h, renamed, time.Minute, "provisioned", provisionedMachine)
	g.Expect(forced.Status.GPUs).To(HaveLen(2))

	// Others' reservations in the same location.
	other, err := gpuname.Build(gpuname.Owner{Namespace: h.ns, Cluster: "ml-other", Machine: "m"}, 0)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = h.sim.ReserveVGPUs(vcosim.SeedCustomer, vcosim.SeedLocation, vcosim.SeedStubGPUProfile, "team-b-training", other)
	g.Expect(err).NotTo(HaveOccurred())
	// A person renames one reservation in the portal: it is no longer recognisably ours.
	g.Expect(h.sim.RenameVGPU(renamed.Status.GPUs[0].ID, renamed.Status.GPUs[0].Name+"-keep")).To(Succeed())
	keepName := renamed.Status.GPUs[0].Name + "-keep"
	g.Expect(gpuname.Classify(keepName)).To(Equal(gpuname.Renamed))

	// Force-delete while the provider is down, removing the finalizer by hand: the finalizer
	// never runs, so the VM and both reservations stay.
	h.stop()
	g.Expect(env.Client.Delete(ctx, forced, client.GracePeriodSeconds(0))).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(forced), forced)).To(Succeed())
	controllerutil.RemoveFinalizer(forced, capvcov1.VCOMachineFinalizer)
	g.Expect(env.Client.Update(ctx, forced)).To(Succeed())
	h.waitGone(forced, 30*time.Second)
	h.start()
	var billedForced int
	for _, b := range h.sim.Billed() {
		if b.Kind == "vgpu" && gpuname.OwnedByMachine(b.Name, gpuname.Owner{Namespace: h.ns, Cluster: "ml", Machine: "gpu-forced"}) {
			billedForced++
		}
	}
	g.Expect(billedForced).To(Equal(2), "a force-deleted machine's reservations stay billed until teardown")

	g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	h.waitGone(vc, 2*time.Minute)
	survivors := []string{keepName, "team-b-training", other}
	h.assertNothingLeft(func(name string) bool { return slices.Contains(survivors, name) })
	var left []string
	for _, v := range h.sim.Snapshot().VGPUs {
		left = append(left, v.Name)
	}
	slices.Sort(left)
	slices.Sort(survivors)
	g.Expect(left).To(Equal(survivors), "exactly the reservations that are not the cluster's survive")
}

// TestStatusWipedAdoptionRecreatesNothing: as after clusterctl move, status is gone and the
// controllers restart; they adopt everything by name and id (same cloudspace, load balancer,
// pool and VM ids, unchanged provider IDs), create nothing, and warn only for the cloudspace
// that runs VMs.
func TestStatusWipedAdoptionRecreatesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	g := NewWithT(t)
	ctx := context.Background()
	_, live := h.cluster("live", nil)
	_, empty := h.cluster("empty", nil)
	waitFor(h, live, time.Minute, "provisioned", provisionedCluster)
	waitFor(h, empty, time.Minute, "provisioned", provisionedCluster)
	m := h.machine("live", "cp-0", true, nil)
	gm := h.machine("live", "gpu-0", false, func(m *capvcov1.VCOMachine, _ *clusterv1.Machine) {
		m.Spec.GPU = &capvcov1.GPUSpec{Vendor: "nvidia"}
	})
	waitFor(h, m, time.Minute, "provisioned", provisionedMachine)
	waitFor(h, gm, time.Minute, "provisioned", provisionedMachine)
	waitFor(h, live, time.Minute, "a member", func(vc *capvcov1.VCOCluster) bool { return len(vc.Status.LoadBalancer.Members) == 1 })
	before := struct {
		live, empty capvcov1.VCOClusterStatus
		machine     capvcov1.VCOMachine
		gpus        []capvcov1.GPUStatus
	}{*live.Status.DeepCopy(), *empty.Status.DeepCopy(), *m.DeepCopy(), gm.Status.GPUs}

	h.stop()
	for _, o := range []client.Object{live, empty, m, gm} {
		g.Expect(h.get(o)).To(Succeed())
	}
	live.Status, empty.Status, m.Status, gm.Status = capvcov1.VCOClusterStatus{}, capvcov1.VCOClusterStatus{}, capvcov1.VCOMachineStatus{}, capvcov1.VCOMachineStatus{}
	for _, o := range []client.Object{live, empty, m, gm} {
		g.Expect(env.Client.Status().Update(ctx, o)).To(Succeed())
	}
	h.sim.ResetRequests()
	h.start()

	waitFor(h, live, time.Minute, "provisioned again", provisionedCluster)
	waitFor(h, empty, time.Minute, "provisioned again", provisionedCluster)
	waitFor(h, m, time.Minute, "provisioned again", provisionedMachine)
	waitFor(h, gm, time.Minute, "provisioned again", provisionedMachine)
	g.Expect(gm.Status.GPUs).To(Equal(before.gpus), "the same reservation, found by name")
	waitFor(h, live, time.Minute, "a member again", func(vc *capvcov1.VCOCluster) bool {
		return vc.Status.LoadBalancer != nil && len(vc.Status.LoadBalancer.Members) == 1
	})
	for _, pair := range []struct{ now, was capvcov1.VCOClusterStatus }{{live.Status, before.live}, {empty.Status, before.empty}} {
		g.Expect(pair.now.Cloudspaces).To(HaveLen(1))
		g.Expect(pair.now.Cloudspaces[0].ID).To(Equal(pair.was.Cloudspaces[0].ID))
		g.Expect(pair.now.Cloudspaces[0].Adopted).To(BeTrue())
		g.Expect(pair.now.LoadBalancer.ID).To(Equal(pair.was.LoadBalancer.ID))
		g.Expect(pair.now.LoadBalancer.ServerPoolID).To(Equal(pair.was.LoadBalancer.ServerPoolID))
	}
	g.Expect(m.Spec.ProviderID).To(Equal(before.machine.Spec.ProviderID))
	g.Expect(*m.Status.VMID).To(Equal(*before.machine.Status.VMID))
	if n, what := h.mutating(); n > 0 {
		t.Fatalf("adoption made %d mutating calls: %v", n, what)
	}
	g.Expect(h.sim.Snapshot().Cloudspaces).To(HaveLen(2))

	var events corev1.EventList
	g.Eventually(func() []string {
		_ = env.Client.List(ctx, &events, client.InNamespace(h.ns))
		var out []string
		for _, e := range events.Items {
			if e.Reason == capvcov1.AdoptedLiveCloudspaceEvent {
				out = append(out, e.InvolvedObject.Name+"/"+e.Type)
			}
		}
		return out
	}, 10*time.Second, 100*time.Millisecond).Should(Equal([]string{"live/Warning"}), "only the cloudspace running VMs warns")
}

// TestVMLostOutOfBandIsReported: a VM deleted behind the provider's back is reported on the
// machine and never silently recreated.
func TestVMLostOutOfBandIsReported(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{machineResync: 2 * time.Second})
	g := NewWithT(t)
	ctx := context.Background()
	_, vc := h.cluster("lost", nil)
	waitFor(h, vc, time.Minute, "provisioned", provisionedCluster)
	m := h.machine("lost", "md-0", false, nil)
	waitFor(h, m, time.Minute, "provisioned", provisionedMachine)

	tok, err := h.sim.Token(vcosim.SeedOperatorPrinc, 0)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := vco.New(vco.Credentials{URL: h.sim.APIURL(), Customer: vcosim.SeedCustomer, JWT: tok}, vco.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.DeleteVM(ctx, m.Status.CloudspaceID, int(*m.Status.VMID), vco.DeleteVMOptions{Permanently: true})).To(Succeed())

	// The periodic resync (2 s here, 10 min by default) finds it.
	waitFor(h, m, 30*time.Second, "VMReady=False NotFound", func(m *capvcov1.VCOMachine) bool {
		c := conditions.Get(m, capvcov1.VMReadyCondition)
		return c != nil && c.Reason == capvcov1.NotFoundReason
	})
	g.Expect(conditions.IsFalse(m, capvcov1.ReadyCondition)).To(BeTrue())
	g.Expect(ptr.Deref(m.Status.Initialization.Provisioned, false)).To(BeTrue(), "provisioned never goes back")
	for _, v := range h.sim.Snapshot().VMs {
		g.Expect(v.Status).To(Equal("DESTROYED"), "no VM was recreated")
	}
	var events corev1.EventList
	g.Expect(env.Client.List(ctx, &events, client.InNamespace(h.ns))).To(Succeed())
	g.Expect(slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
		return e.Reason == capvcov1.VMNotFoundEvent && strings.Contains(e.Message, "not recreated")
	})).To(BeTrue())
}

// TestBootstrapSecretArrivesLater: a Machine naming a bootstrap Secret that does not exist yet
// waits (VMReady=Unknown WaitingForBootstrapData) and creates its VM once the Secret appears,
// with no event to wake it (Secrets are not watched).
func TestBootstrapSecretArrivesLater(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	_, vc := h.cluster("late", nil)
	waitFor(h, vc, time.Minute, "provisioned", provisionedCluster)
	m := testenv.Machine(h.ns, "md-0", "late", "VCOMachine", "md-0", "md-0-bootstrap")
	m.Spec.Version = "v1.36.3"
	h.create(m)
	vm := testenv.VCOMachine(h.ns, "md-0", "late", h.imageID(vcosim.SeedLocation))
	h.create(vm)
	waitFor(h, vm, time.Minute, "WaitingForBootstrapData", func(m *capvcov1.VCOMachine) bool {
		c := conditions.Get(m, capvcov1.VMReadyCondition)
		return c != nil && c.Reason == capvcov1.WaitingForBootstrapDataReason
	})
	h.create(testenv.BootstrapSecret(h.ns, "md-0-bootstrap", "late", "#cloud-config\n"))
	waitFor(h, vm, 30*time.Second, "provisioned", provisionedMachine)
}
