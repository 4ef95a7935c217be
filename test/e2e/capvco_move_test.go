//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/test/e2e/install"
	"github.com/capx-io/capx/test/localcluster"
)

// TestCAPVCOMove moves the quickstart's CAPVCO cluster (one control plane, a worker and a GPU
// worker on the whitesky.cloud simulator) with the real `clusterctl move` to a second management
// cluster and checks that the target adopts everything and recreates nothing:
//
//   - one simulator serves both management clusters. It runs in this test process, on the host,
//     and each cluster reaches it through a listening socket opened inside that cluster's
//     network namespace (localcluster.Cluster.Listen) behind a selector-less Service with the
//     same ClusterIP in both clusters (the target gets the source's Service range). So the
//     platform URL in the moved credential Secret names the same platform on both sides, as a
//     real whitesky.cloud URL does, and there is one state both managers see.
//   - after the move, the target's VCOCluster and VCOMachines report the same cloudspace, load
//     balancer, server pool, VM and vGPU ids and the same provider IDs as on the source, with
//     status.cloudspaces[].adopted and the AdoptedLiveCloudspace event;
//   - the simulator's state holds the same objects before and after, and it received no
//     mutating call at all from the moment the move started: nothing recreated, nothing
//     destroyed by the source.
//   - deleting the cluster on the target then leaves nothing in the simulator (no cloudspace,
//     VM, disk, load balancer, pool or billed vGPU).
func TestCAPVCOMove(t *testing.T) {
	const ns, name = "vco-move", "vcomoved"
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	a := mgmtA(t)
	k := shared.kit
	g := NewWithT(t)

	// The target shares the source's Service range, so that the simulator's Service has the
	// same address in both clusters. The namespaces are separate: the ranges never meet.
	target := upInBackground(t, localcluster.Options{Name: clusterB, ServiceCIDR: a.ServiceCIDR()}, k, install.FlowClusterctl)
	collectOnFailure(t, "capvco-move", a)

	// Registered after the target's teardown, so it runs first: the listening sockets hold
	// the clusters' network namespaces.
	sim := startSharedSimulator(t)
	var simURL string
	step(t, "serve the simulator to the source", func() {
		simURL = sim.serve(t, ctx, a, "")
	})

	step(t, "provision the quickstart's CAPVCO cluster on the source", func() {
		applySimulatorCredentials(t, ctx, a, sim.Sim, ns, name+"-vco-credentials", simURL)
		eventually(t, 2*time.Minute, func(g Gomega) {
			_, err := a.ApplyCluster(ctx, k.Repository, install.ClusterSpec{Name: name, Namespace: ns, Flavor: install.FlavorVCOLocal,
				Vars: map[string]string{"VCO_CREDENTIALS_SECRET": name + "-vco-credentials"}})
			g.Expect(err).NotTo(HaveOccurred())
		}, "the vco-local cluster applied")
		g.Expect(a.WaitProvisioned(ctx, ns, name, 3*time.Minute)).To(Succeed())
	})

	step(t, "stand in for the workload cluster: Nodes for every Machine", func() {
		standInForWorkloadCluster(t, ctx, a, ns, name)
	})

	var before capvcoIDs
	var platformBefore platformIDs
	step(t, "record the ids on the source", func() {
		eventually(t, time.Minute, func(g Gomega) {
			before = readCAPVCOIDs(g, ctx, a, ns, name)
			g.Expect(before.Machines).To(HaveLen(3))
			g.Expect(before.GPUs).To(HaveLen(1), "the GPU worker's reservation")
		}, "every id reported on the source")
		vc := &capvcov1.VCOCluster{}
		g.Expect(a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vc)).To(Succeed())
		g.Expect(vc.Status.Cloudspaces).To(HaveLen(1))
		g.Expect(vc.Status.Cloudspaces[0].Adopted).To(BeFalse(), "the source created its cloudspace")
		platformBefore = readPlatformIDs(sim.Sim)
		g.Expect(platformBefore.Cloudspaces).To(HaveLen(1))
		g.Expect(platformBefore.VMs).To(HaveLen(3))
		g.Expect(platformBefore.VGPUs).To(HaveLen(1))
		t.Logf("creates on the simulator before the move: %v", creates(sim.Requests()))
	})

	b := target()
	collectOnFailure(t, "capvco-move", b)
	step(t, "serve the same simulator to the target", func() {
		g.Expect(sim.serve(t, ctx, b, sim.clusterIP)).To(Equal(simURL), "the simulator's URL is the same in both clusters")
	})

	moveStarted := len(sim.Requests())
	step(t, "clusterctl move", func() {
		out, err := k.Repository.Clusterctl(ctx, a.Kubeconfig(), "move", "-n", ns, "--to-kubeconfig", b.Kubeconfig(), "-v", "1")
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	})

	step(t, "the target adopts the same cloudspace, load balancer, pool, VMs and vGPU", func() {
		eventually(t, 3*time.Minute, func(g Gomega) {
			cluster := &clusterv1.Cluster{}
			g.Expect(b.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
			g.Expect(ptr.Deref(cluster.Spec.Paused, false)).To(BeFalse(), "unpaused on the target")
			after := readCAPVCOIDs(g, ctx, b, ns, name)
			g.Expect(after).To(Equal(before), "the ids on the target are the source's")
			vc := &capvcov1.VCOCluster{}
			g.Expect(b.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vc)).To(Succeed())
			g.Expect(isTrue(vc.Status.Conditions, capvcov1.ReadyCondition)).To(BeTrue(), "Ready on the target: %v", vc.Status.Conditions)
			g.Expect(vc.Status.Cloudspaces).To(HaveLen(1))
			g.Expect(vc.Status.Cloudspaces[0].Adopted).To(BeTrue(), "status.cloudspaces[].adopted on the target")
			events := &corev1.EventList{}
			g.Expect(b.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
			g.Expect(slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
				return e.Reason == capvcov1.AdoptedLiveCloudspaceEvent && e.InvolvedObject.Name == name && e.Type == corev1.EventTypeWarning
			})).To(BeTrue(), "the AdoptedLiveCloudspace event on the target")
		}, "the target's objects report the source's ids")
		// Long enough for a takeover to show what it would create: the machines' waits poll
		// every few seconds, the cluster's health checks every interval.
		time.Sleep(15 * time.Second)
	})

	step(t, "nothing recreated or destroyed on the platform", func() {
		g.Expect(readPlatformIDs(sim.Sim)).To(Equal(platformBefore), "the simulator holds the same objects")
		since := sim.Requests()[moveStarted:]
		g.Expect(mutatingCalls(since)).To(BeEmpty(), "mutating whitesky.cloud calls after the move started")
		// The ids above came from the platform, not from a copied status: the target read it.
		g.Expect(len(since)).To(BeNumerically(">", 0), "the target's manager asked the platform")
		t.Logf("whitesky.cloud calls since the move started: %d, none mutating", len(since))
		g.Expect(readCAPVCOIDs(g, ctx, b, ns, name)).To(Equal(before))
		left := &capvcov1.VCOMachineList{}
		g.Expect(a.Client.List(ctx, left, client.InNamespace(ns))).To(Succeed())
		g.Expect(left.Items).To(BeEmpty(), "the source kept VCOMachines")
	})

	step(t, "deleting the cluster on the target leaves nothing on the platform", func() {
		deleteCluster(t, ctx, b, ns, name)
		eventually(t, 3*time.Minute, func(g Gomega) {
			err := b.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &capvcov1.VCOCluster{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the VCOCluster gone")
		}, "the cluster deleted on the target")
		g.Expect(readPlatformIDs(sim.Sim)).To(Equal(platformIDs{}), "live objects left on the platform")
		g.Expect(sim.Billed()).To(BeEmpty(), "billed objects left (recycle bin, vGPUs, public IPs)")
	})
}

// sharedSimulator is one whitesky.cloud simulator served to several local clusters.
type sharedSimulator struct {
	*vcosim.Sim
	srv *http.Server
	// clusterIP is the address of the simulator's Service, the same in every cluster.
	clusterIP string
}

// The simulator's Service in each management cluster, and the port its socket listens on in
// the cluster's namespace.
const (
	sharedSimNamespace = "default"
	sharedSimService   = "vcosim-host"
	sharedSimPort      = 8080
	sharedSimNodePort  = 18080
)

func startSharedSimulator(t *testing.T) *sharedSimulator {
	t.Helper()
	sim, err := vcosim.New(vcosim.Options{TimeScale: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	s := &sharedSimulator{Sim: sim, srv: &http.Server{Handler: sim, ReadHeaderTimeout: 30 * time.Second}}
	t.Cleanup(func() {
		_ = s.srv.Close() // closes every listener: the clusters' namespaces can go
		_ = sim.Close()
	})
	return s
}

// serve opens the simulator's socket inside the cluster's namespace and points a Service at it:
// at clusterIP when set (the address it has in the other cluster), else wherever the cluster
// allocates it. It returns the simulator's URL as the cluster's pods reach it.
func (s *sharedSimulator) serve(t *testing.T, ctx context.Context, m *install.Management, clusterIP string) string {
	t.Helper()
	g := NewWithT(t)
	ln, err := m.Listen(sharedSimNodePort)
	g.Expect(err).NotTo(HaveOccurred())
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Logf("simulator on %s: %v", m.Name(), err)
		}
	}()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: sharedSimService, Namespace: sharedSimNamespace},
		Spec: corev1.ServiceSpec{
			ClusterIP: clusterIP,
			Ports:     []corev1.ServicePort{{Name: "http", Port: sharedSimPort, TargetPort: intstr.FromInt32(sharedSimNodePort)}},
		},
	}
	// A second run in the same process (-count) finds the source's Service and slice in place.
	if err := m.Client.Create(ctx, svc); apierrors.IsAlreadyExists(err) {
		g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())
	} else {
		g.Expect(err).NotTo(HaveOccurred(), "the simulator's Service in %s", m.Name())
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: sharedSimService, Namespace: sharedSimNamespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: sharedSimService}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{m.NodeIP()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](sharedSimNodePort), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	g.Expect(client.IgnoreAlreadyExists(m.Client.Create(ctx, slice))).To(Succeed())
	s.clusterIP = svc.Spec.ClusterIP
	return fmt.Sprintf("http://%s/api/1", net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(sharedSimPort)))
}

// applySimulatorCredentials writes the cluster's credential Secret for the seeded cluster
// principal, labelled so that clusterctl move takes it along (nothing owns it).
func applySimulatorCredentials(t *testing.T, ctx context.Context, m *install.Management, sim *vcosim.Sim, ns, name, url string) {
	t.Helper()
	g := NewWithT(t)
	jwt, err := sim.Token(vcosim.SeedClusterPrinc, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = m.Kubectl(ctx, []byte(fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", ns)), "apply", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred())
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{clusterctlv1.ClusterctlMoveLabel: ""}},
		StringData: map[string]string{
			vco.SecretKeyURL: url, vco.SecretKeyCustomer: vcosim.SeedCustomer, vco.SecretKeyJWT: jwt, // plain http: both managers run with --vco-allow-http (config/local)
		},
	}
	g.Expect(m.Client.Create(ctx, secret)).To(Succeed())
}

// capvcoIDs is every platform id and provider ID the CAPVCO objects of a cluster report.
type capvcoIDs struct {
	Cloudspaces  []string // site=id name
	LoadBalancer string   // id/pool
	Machines     []string // name providerID vm=<id> cloudspace=<id>
	GPUs         []string // machine name id
}

func readCAPVCOIDs(g Gomega, ctx context.Context, m *install.Management, ns, name string) capvcoIDs {
	var ids capvcoIDs
	vc := &capvcov1.VCOCluster{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vc)).To(Succeed())
	g.Expect(ptr.Deref(vc.Status.Initialization.Provisioned, false)).To(BeTrue(), "VCOCluster provisioned")
	for _, cs := range vc.Status.Cloudspaces {
		g.Expect(cs.ID).NotTo(BeEmpty())
		ids.Cloudspaces = append(ids.Cloudspaces, fmt.Sprintf("%s=%s %s", cs.Site, cs.ID, cs.Name))
	}
	g.Expect(vc.Status.LoadBalancer).NotTo(BeNil(), "status.loadBalancer")
	g.Expect(vc.Status.LoadBalancer.ServerPoolID).NotTo(BeEmpty())
	ids.LoadBalancer = vc.Status.LoadBalancer.ID + "/" + vc.Status.LoadBalancer.ServerPoolID
	machines := &capvcov1.VCOMachineList{}
	g.Expect(m.Client.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
	for _, vm := range machines.Items {
		g.Expect(ptr.Deref(vm.Status.Initialization.Provisioned, false)).To(BeTrue(), "VCOMachine %s provisioned", vm.Name)
		g.Expect(vm.Spec.ProviderID).To(HavePrefix("vco://"))
		g.Expect(vm.Status.VMID).NotTo(BeNil(), "VCOMachine %s status.vmID", vm.Name)
		ids.Machines = append(ids.Machines, fmt.Sprintf("%s %s vm=%d cloudspace=%s", vm.Name, vm.Spec.ProviderID, *vm.Status.VMID, vm.Status.CloudspaceID))
		for _, gpu := range vm.Status.GPUs {
			g.Expect(gpu.ID).NotTo(BeEmpty())
			ids.GPUs = append(ids.GPUs, fmt.Sprintf("%s %s %s", vm.Name, gpu.Name, gpu.ID))
		}
	}
	sort.Strings(ids.Machines)
	sort.Strings(ids.GPUs)
	return ids
}

// platformIDs is what lives on the simulated platform (destroyed objects left out).
type platformIDs struct {
	Cloudspaces, VMs, Disks, LoadBalancers, ServerPools, VGPUs []string
}

func readPlatformIDs(sim *vcosim.Sim) platformIDs {
	snap := sim.Snapshot()
	var p platformIDs
	for _, cs := range snap.Cloudspaces {
		if cs.Status != "DESTROYED" {
			p.Cloudspaces = append(p.Cloudspaces, cs.ID)
		}
	}
	for _, vm := range snap.VMs {
		if vm.Status != "DESTROYED" {
			p.VMs = append(p.VMs, fmt.Sprint(vm.ID))
		}
	}
	for _, d := range snap.Disks {
		p.Disks = append(p.Disks, fmt.Sprint(d.ID))
	}
	for _, lb := range snap.LoadBalancers {
		p.LoadBalancers = append(p.LoadBalancers, lb.ID)
	}
	for _, sp := range snap.ServerPools {
		p.ServerPools = append(p.ServerPools, sp.ID)
	}
	for _, v := range snap.VGPUs {
		p.VGPUs = append(p.VGPUs, v.ID+" "+v.Name)
	}
	return p
}

// mutatingCalls lists the calls that changed (or tried to change) the platform.
func mutatingCalls(reqs []vcosim.RequestRecord) []string {
	var out []string
	for _, r := range reqs {
		if r.Method != http.MethodGet && !strings.HasPrefix(r.Path, "/iam/") {
			out = append(out, fmt.Sprintf("%s %s -> %d", r.Method, r.Path, r.Status))
		}
	}
	return out
}

// creates counts the POST calls per route.
func creates(reqs []vcosim.RequestRecord) map[string]int {
	out := map[string]int{}
	for _, r := range reqs {
		if r.Method == http.MethodPost {
			out[r.Route]++
		}
	}
	return out
}
