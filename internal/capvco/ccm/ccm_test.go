package ccm

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	cloudproviderapi "k8s.io/cloud-provider/api"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	nodelifecycle "k8s.io/cloud-provider/controllers/nodelifecycle"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"

	"github.com/capx-io/capx/internal/capvco/ccm/config"
	"github.com/capx-io/capx/internal/capvco/ccm/servicelb"
	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/internal/vco/vcotest"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, testenv.Options{}, &env)) }

// cluster is a CAPVCO cluster as the CCM sees it: a simulator with the cluster's cloudspace,
// the CCM's credential as mounted files, and the real cloud-provider controllers (cloud node,
// node lifecycle, service) plus the members controller running against envtest's API server.
type cluster struct {
	t    *testing.T
	sim  *vcosim.Server
	api  *vco.Client
	kube kubernetes.Interface
	csID string
	ip   string
	img  int
	// healthy maps a node address to whether its health port answers 200.
	mu      sync.Mutex
	healthy map[string]bool
}

// newCluster starts everything for one test; every test has its own cluster name, so the
// Nodes of one test are never candidates of another's Services.
func newCluster(t *testing.T, name string) *cluster {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := &cluster{t: t, sim: vcosim.NewTestServer(t, vcosim.Options{}), healthy: map[string]bool{}}
	c.api = vcotest.Client(t, c.sim, vcosim.SeedClusterPrinc)
	cs, _, err := c.api.EnsureCloudspace(ctx, vco.CreateCloudspaceRequest{Name: names.Cloudspace("team-a", name, names.PrimarySite), Location: vcosim.SeedLocation})
	if err != nil {
		t.Fatal(err)
	}
	c.csID, c.ip = cs.ID, cs.ExternalNetworkIP
	img, err := c.api.FindImage(ctx, vcosim.SeedLocation, vcosim.SeedImageName)
	if err != nil {
		t.Fatal(err)
	}
	c.img = img.ID

	tok, err := c.sim.Token(vcosim.SeedClusterPrinc, 0)
	if err != nil {
		t.Fatal(err)
	}
	dir := vcotest.CredentialsDir(t, t.TempDir(), c.sim.APIURL(), tok)
	cfg, err := config.Parse([]byte("credentialsDir: " + dir + "\ncluster: {namespace: team-a, name: " + name + "}\nsites: [{name: primary, location: " +
		vcosim.SeedLocation + "}]\nloadBalancer: {healthCheckIntervalSeconds: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cloud := New(cfg, FromCredentials(cfg, vco.NewFactory(vco.Options{})), servicelb.HTTPProber{Dial: c.dial(t)})

	c.kube = kubernetes.NewForConfigOrDie(env.Config)
	informer := informers.NewSharedInformerFactory(c.kube, 0)
	nodes, services := informer.Core().V1().Nodes(), informer.Core().V1().Services()
	metrics := controllersmetrics.NewControllerManagerMetrics("capvco-ccm-test")
	nc, err := nodecontroller.NewCloudNodeController(nodes, c.kube, cloud, time.Minute, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := nodelifecycle.NewCloudNodeLifecycleController(nodes, c.kube, cloud, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := servicecontroller.New(cloud, c.kube, services, nodes, "kubernetes", utilfeature.DefaultFeatureGate)
	if err != nil {
		t.Fatal(err)
	}
	mc := NewMembersController(cloud, services, nodes)
	informer.Start(ctx.Done())
	go nc.RunWithContext(ctx, metrics)
	go lc.Run(ctx, metrics)
	go sc.Run(ctx, 1, metrics)
	go mc.Run(ctx)
	return c
}

// dial routes the members controller's probes of node addresses to local servers answering
// 200 or 503 as c.healthy says; an unknown address refuses. Only the dial is redirected.
func (c *cluster) dial(t *testing.T) func(ctx context.Context, network, addr string) (net.Conn, error) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	t.Cleanup(ok.Close)
	t.Cleanup(bad.Close)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		c.mu.Lock()
		h, known := c.healthy[host]
		c.mu.Unlock()
		target := bad.Listener.Addr().String()
		switch {
		case !known:
			target = "127.0.0.1:1" // refused
		case h:
			target = ok.Listener.Addr().String()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, target)
	}
}

func (c *cluster) setHealthy(addr string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.healthy[addr] = ok
}

// vm creates a machine's VM as CAPVCO does: named and hostnamed after the machine.
func (c *cluster) vm(name string) vco.VM {
	c.t.Helper()
	v, _, err := c.api.EnsureVM(context.Background(), c.csID, vco.CreateVMRequest{Name: name, Hostname: name, VCPUs: 2, MemoryMiB: 4096, ImageID: c.img})
	if err != nil {
		c.t.Fatal(err)
	}
	return v
}

// joinNode registers a Node as a kubelet started with --cloud-provider=external does:
// tainted uninitialised, with its hostname, and Ready.
func (c *cluster) joinNode(name string) *corev1.Node {
	c.t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}}}}
	n, err := c.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = c.kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	c.setReady(name, corev1.ConditionTrue)
	return n
}

func (c *cluster) setReady(name string, status corev1.ConditionStatus) {
	c.t.Helper()
	Eventually(func() error {
		n, err := c.kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: now, LastTransitionTime: now, Reason: "Test"}}
		if !slices.ContainsFunc(n.Status.Addresses, func(a corev1.NodeAddress) bool { return a.Type == corev1.NodeHostName }) {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
		}
		_, err = c.kube.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{})
		return err
	}).WithTimeout(10 * time.Second).Should(Succeed())
}

func (c *cluster) node(name string) *corev1.Node {
	n, err := c.kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return n
}

func hasTaint(n *corev1.Node, key string) bool {
	return n != nil && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

const patience = 30 * time.Second

func TestNodeIsInitialised(t *testing.T) {
	RegisterTestingT(t)
	c := newCluster(t, "init")
	v := c.vm("init-cp-0")
	c.joinNode("init-cp-0")
	Eventually(func(g Gomega) {
		n := c.node("init-cp-0")
		g.Expect(n).NotTo(BeNil())
		g.Expect(hasTaint(n, cloudproviderapi.TaintExternalCloudProvider)).To(BeFalse(), "the uninitialized taint is removed")
		g.Expect(n.Spec.ProviderID).To(Equal(names.ProviderID(vcosim.SeedLocation, v.ID)), "the provider ID CAPVCO sets on the VCOMachine")
		g.Expect(n.Labels).To(HaveKeyWithValue(corev1.LabelTopologyRegion, vcosim.SeedLocation))
		g.Expect(n.Labels).To(HaveKeyWithValue(corev1.LabelTopologyZone, names.PrimarySite))
		g.Expect(n.Labels).To(HaveKeyWithValue(corev1.LabelInstanceTypeStable, "2vcpu-4096mib"))
		g.Expect(n.Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: v.PrivateIP()}))
	}).WithTimeout(patience).Should(Succeed())
}

func TestNodeOfUnknownVMStaysUninitialised(t *testing.T) {
	RegisterTestingT(t)
	c := newCluster(t, "stranger")
	c.joinNode("stranger-0") // no VM of that name in the cluster's cloudspace
	Consistently(func() bool {
		n := c.node("stranger-0")
		return n != nil && hasTaint(n, cloudproviderapi.TaintExternalCloudProvider) && n.Spec.ProviderID == ""
	}).WithTimeout(3 * time.Second).Should(BeTrue())
}

func TestNodeLifecycle(t *testing.T) {
	RegisterTestingT(t)
	c := newCluster(t, "life")
	gone, halted := c.vm("life-w-0"), c.vm("life-w-1")
	c.joinNode("life-w-0")
	c.joinNode("life-w-1")
	for _, n := range []string{"life-w-0", "life-w-1"} {
		Eventually(func() string { return c.node(n).Spec.ProviderID }).WithTimeout(patience).ShouldNot(BeEmpty())
	}
	// The kubelets stop reporting: one VM is deleted out of band, the other halted.
	ctx := context.Background()
	if err := c.api.DeleteVM(ctx, c.csID, gone.ID, vco.DeleteVMOptions{Permanently: true}); err != nil {
		t.Fatal(err)
	}
	if err := c.api.StopVM(ctx, c.csID, halted.ID, false); err != nil {
		t.Fatal(err)
	}
	c.setReady("life-w-0", corev1.ConditionUnknown)
	c.setReady("life-w-1", corev1.ConditionUnknown)
	Eventually(func() bool {
		_, err := c.kube.CoreV1().Nodes().Get(ctx, "life-w-0", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(patience).Should(BeTrue(), "the Node of a deleted VM is deleted")
	Eventually(func() bool { return hasTaint(c.node("life-w-1"), cloudproviderapi.TaintNodeShutdown) }).WithTimeout(patience).Should(BeTrue(),
		"the Node of a halted VM is tainted shut down, not deleted")
	Expect(c.node("life-w-1")).NotTo(BeNil())
}

func TestServiceLoadBalancer(t *testing.T) {
	RegisterTestingT(t)
	c := newCluster(t, "lb")
	ctx := context.Background()
	var addrs []string
	for _, n := range []string{"lb-w-0", "lb-w-1"} {
		addrs = append(addrs, c.vm(n).PrivateIP())
		c.joinNode(n)
		c.setHealthy(addrs[len(addrs)-1], true)
	}
	for _, n := range []string{"lb-w-0", "lb-w-1"} {
		Eventually(func() map[string]string { return c.node(n).Labels }).WithTimeout(patience).Should(HaveKey(corev1.LabelTopologyZone))
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	svc, err := c.kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := servicelb.PoolName("team-a", "lb", svc)
	members := func() []string {
		var out []string
		for _, p := range c.sim.Snapshot().ServerPools {
			if p.Name == pool {
				for _, h := range p.Hosts {
					out = append(out, h.Address)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	Eventually(func() []string {
		s, _ := c.kube.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		var ips []string
		for _, i := range s.Status.LoadBalancer.Ingress {
			ips = append(ips, i.IP)
		}
		return ips
	}).WithTimeout(patience).Should(Equal([]string{c.ip}))
	slices.Sort(addrs)
	Eventually(members).WithTimeout(patience).Should(Equal(addrs))
	svc, _ = c.kube.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	lbs := c.sim.Snapshot().LoadBalancers
	Expect(lbs).To(HaveLen(1))
	Expect(lbs[0].FrontIP).To(Equal(c.ip))
	Expect(lbs[0].FrontPort).To(Equal(80))
	Expect(lbs[0].TargetPort).To(Equal(int(svc.Spec.Ports[0].NodePort)))

	// The pool follows readiness and health, though the service controller never calls the
	// CCM for either.
	c.setReady("lb-w-1", corev1.ConditionFalse)
	Eventually(members).WithTimeout(patience).Should(Equal([]string{c.vm("lb-w-0").PrivateIP()}))
	c.setReady("lb-w-1", corev1.ConditionTrue)
	c.setHealthy(c.vm("lb-w-0").PrivateIP(), false)
	Eventually(members).WithTimeout(patience).Should(Equal([]string{c.vm("lb-w-1").PrivateIP()}))

	// Ports change in place.
	Eventually(func() error {
		s, err := c.kube.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Ports[0].Port = 8080
		_, err = c.kube.CoreV1().Services("default").Update(ctx, s, metav1.UpdateOptions{})
		return err
	}).Should(Succeed())
	Eventually(func() []int {
		var out []int
		for _, lb := range c.sim.Snapshot().LoadBalancers {
			Expect(lb.ID).To(Equal(lbs[0].ID), "updated in place")
			out = append(out, lb.FrontPort)
		}
		return out
	}).WithTimeout(patience).Should(Equal([]int{8080}))

	// Deleted with the Service: nothing is left on the platform, and the Service goes.
	Expect(c.kube.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{})).To(Succeed())
	Eventually(func() bool {
		_, err := c.kube.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(patience).Should(BeTrue())
	snap := c.sim.Snapshot()
	Expect(snap.LoadBalancers).To(BeEmpty())
	Expect(snap.ServerPools).To(BeEmpty())
}
