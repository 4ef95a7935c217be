package controllers_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/capvco/controllers"
	"github.com/capx-io/capx/internal/capvco/health"
	"github.com/capx-io/capx/internal/capvco/platform"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/testenv/mgrtest"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{CAPI: true}, &env))
}

// countingFactory is the platform injection point as tests use it: real clients, pointed at the
// in-process simulator by the credential Secret, with fast retries, counting how often the
// controllers asked for a client.
type countingFactory struct {
	f     *vco.Factory
	calls atomic.Int64
}

func (c *countingFactory) Client(creds vco.Credentials) (platform.Client, error) {
	c.calls.Add(1)
	return c.f.Client(creds)
}

// apiServers stands in for the control-plane machines' API servers: one real TLS listener on
// loopback, reached through the prober's dialer for every address that is "up".
type apiServers struct {
	ln   net.Listener
	mu   sync.Mutex
	down map[string]bool
}

func newAPIServers(t testing.TB) *apiServers {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); _ = c.Close() }()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return &apiServers{ln: ln, down: map[string]bool{}}
}

func (a *apiServers) setDown(addr string, down bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down[addr] = down
}

func (a *apiServers) prober() health.Prober {
	return health.TLSProber{Timeout: time.Second, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		a.mu.Lock()
		down := a.down[host]
		a.mu.Unlock()
		if down {
			return nil, fmt.Errorf("dial %s: connection refused", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, a.ln.Addr().String())
	}}
}

// harness is one test's provider: a simulator, the CAPVCO controllers in their own manager
// watching only the test's namespace, and the namespace itself.
type harness struct {
	t        testing.TB
	ns       string
	sim      *vcosim.Server
	factory  *countingFactory
	servers  *apiServers
	ctrl     *mgrtest.CAPVCO
	simToken string
	// logs is everything the CAPVCO controllers logged (at V(10)), to prove what never is.
	logs testenv.SyncBuffer
	opts harnessOptions
}

type harnessOptions struct {
	sim      vcosim.Options
	clientOp vco.Options
	// config, when set, is the API server config the controllers use (a counting transport).
	config *rest.Config
	// machineConcurrency caps concurrent VCOMachine reconciles (default 4).
	machineConcurrency int
	// machineResync is how often provisioned machines' VMs are read back (default 10 min).
	machineResync time.Duration
}

func newHarness(t testing.TB, o harnessOptions) *harness {
	t.Helper()
	h := &harness{t: t, ns: env.NewNamespace(t), sim: vcosim.NewTestServer(t, o.sim), servers: newAPIServers(t), opts: o}
	if h.opts.config == nil {
		h.opts.config = env.Config
	}
	if h.opts.machineConcurrency == 0 {
		h.opts.machineConcurrency = 4
	}
	tok, err := h.sim.Token(vcosim.SeedClusterPrinc, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.simToken = tok
	opts := o.clientOp
	if opts.BaseBackoff == 0 {
		opts.BaseBackoff, opts.MaxBackoff = 5*time.Millisecond, 50*time.Millisecond
	}
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Second
	}
	h.factory = &countingFactory{f: vco.NewFactory(opts)}
	h.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "vco-credentials"},
		Data: map[string][]byte{vco.SecretKeyURL: []byte(h.sim.APIURL()), vco.SecretKeyCustomer: []byte(vcosim.SeedCustomer),
			vco.SecretKeyJWT: []byte(tok)},
	})
	h.start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("CAPI log tail:\n%s", tail(env.CAPILog(), 3000))
		}
	})
	return h
}

// start runs the CAPVCO controllers (again, after stop: a restarted or new management cluster).
func (h *harness) start() {
	h.t.Helper()
	h.ctrl = mgrtest.StartCAPVCO(h.t, env, mgrtest.CAPVCOOptions{Config: h.opts.config, Namespace: h.ns, Verbosity: 10, Logs: &h.logs,
		Controllers: controllers.Options{Platform: h.factory, Prober: h.servers.prober(), MachineConcurrency: h.opts.machineConcurrency,
			ClusterConcurrency: 2, MachineResync: h.opts.machineResync}})
}

// stop stops the CAPVCO controllers.
func (h *harness) stop() { h.ctrl.Stop() }

// create creates o, retrying while Cluster API's webhooks are not serving yet.
func (h *harness) create(o client.Object) {
	h.t.Helper()
	mgrtest.Create(h.t, env, o)
}

// cluster creates a Cluster and its VCOCluster; mutate shapes the VCOCluster.
func (h *harness) cluster(name string, mutate func(*capvcov1.VCOCluster)) (*clusterv1.Cluster, *capvcov1.VCOCluster) {
	c := testenv.Cluster(h.ns, name, "VCOCluster", name)
	c.Spec.ClusterNetwork.Services.CIDRBlocks = []string{"10.96.0.0/12"}
	vc := testenv.VCOCluster(h.ns, name, name, vcosim.SeedLocation, "vco-credentials")
	vc.Spec.ControlPlaneLoadBalancer.HealthCheckIntervalSeconds = 5
	if mutate != nil {
		mutate(vc)
	}
	h.create(c)
	h.create(vc)
	return c, vc
}

// machine creates a Machine, its bootstrap Secret and its VCOMachine.
func (h *harness) machine(cluster, name string, controlPlane bool, mutate func(*capvcov1.VCOMachine, *clusterv1.Machine)) *capvcov1.VCOMachine {
	img := h.imageID(vcosim.SeedLocation)
	h.create(testenv.BootstrapSecret(h.ns, name+"-bootstrap", cluster, "#cloud-config\nhostname: "+name+"\n"))
	m := testenv.Machine(h.ns, name, cluster, "VCOMachine", name, name+"-bootstrap")
	m.Spec.Version = "v1.36.3"
	vm := testenv.VCOMachine(h.ns, name, cluster, img)
	if controlPlane {
		m.Labels[clusterv1.MachineControlPlaneLabel] = ""
		vm.Labels[clusterv1.MachineControlPlaneLabel] = ""
	}
	if mutate != nil {
		mutate(vm, m)
	}
	h.create(m)
	h.create(vm)
	return vm
}

func (h *harness) imageID(location string) int64 {
	for _, img := range h.sim.Snapshot().Images {
		if img.Location == location && img.Name == vcosim.SeedImageName {
			return int64(img.ID)
		}
	}
	h.t.Fatalf("no seeded image in %s", location)
	return 0
}

func (h *harness) get(o client.Object) error {
	return env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o)
}

// waitFor polls obj until ok; on timeout it fails with the object's conditions.
func waitFor[T capi.Object](h *harness, obj T, timeout time.Duration, what string, ok func(T) bool) {
	h.t.Helper()
	mgrtest.WaitFor(h.t, env, obj, timeout, what, ok)
}

func provisionedCluster(vc *capvcov1.VCOCluster) bool {
	return ptr.Deref(vc.Status.Initialization.Provisioned, false)
}
func provisionedMachine(m *capvcov1.VCOMachine) bool {
	return ptr.Deref(m.Status.Initialization.Provisioned, false)
}

// waitGone waits until obj no longer exists.
func (h *harness) waitGone(obj client.Object, timeout time.Duration) {
	h.t.Helper()
	mgrtest.Gone(h.t, env, obj, timeout)
}

// leftovers lists everything the simulator still holds for the customer besides its seed:
// live or soft-deleted cloudspaces, VMs, disks, vGPUs, port forwards, pools, load balancers,
// DNS records, links and certificates, and anything billed.
func leftovers(snap vcosim.Snapshot, billed []vcosim.Billed, keepVGPU func(string) bool) []string {
	var out []string
	for _, c := range snap.Cloudspaces {
		if c.Status != "DESTROYED" {
			out = append(out, fmt.Sprintf("cloudspace %s %s (%s)", c.ID, c.Name, c.Status))
		}
	}
	for _, v := range snap.VMs {
		if v.Status != "DESTROYED" {
			out = append(out, fmt.Sprintf("VM %d %s (%s)", v.ID, v.Name, v.Status))
		}
	}
	for _, d := range snap.Disks {
		out = append(out, fmt.Sprintf("disk %d %s", d.ID, d.Name))
	}
	for _, v := range snap.VGPUs {
		if keepVGPU == nil || !keepVGPU(v.Name) {
			out = append(out, fmt.Sprintf("vGPU %s %s", v.ID, v.Name))
		}
	}
	for _, p := range snap.PortForwards {
		out = append(out, "port forward "+p.ID)
	}
	for _, p := range snap.ServerPools {
		out = append(out, "server pool "+p.ID+" "+p.Name)
	}
	for _, l := range snap.LoadBalancers {
		out = append(out, "load balancer "+l.ID+" "+l.Name)
	}
	for _, r := range snap.DNSRecords {
		out = append(out, "DNS record "+r.Domain)
	}
	for _, l := range snap.Links {
		out = append(out, "link "+l.A+"<->"+l.B)
	}
	for _, c := range snap.Certificates {
		out = append(out, "certificate "+c.Domain)
	}
	for _, b := range billed {
		if b.Kind == "vgpu" && keepVGPU != nil && keepVGPU(b.Name) {
			continue
		}
		out = append(out, fmt.Sprintf("billed %s %s %s (recycle bin %v)", b.Kind, b.ID, b.Name, b.InRecycleBin))
	}
	return out
}

func (h *harness) assertNothingLeft(keepVGPU func(string) bool) {
	h.t.Helper()
	if left := leftovers(h.sim.Snapshot(), h.sim.Billed(), keepVGPU); len(left) > 0 {
		b, _ := json.MarshalIndent(left, "", "  ")
		h.t.Fatalf("the simulator still holds:\n%s", b)
	}
}

// mutating counts the mutating calls the simulator served since the last ResetRequests.
func (h *harness) mutating() (n int, what []string) {
	for _, r := range h.sim.Requests() {
		if r.Method != "GET" && strings.HasPrefix(r.Route, "/api/1/") {
			n++
			what = append(what, r.Method+" "+r.Route)
		}
	}
	return n, what
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
