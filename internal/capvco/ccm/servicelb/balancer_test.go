package servicelb

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/capx-io/capx/internal/capvco/ccm/instances"
	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/internal/vco/vcotest"
)

// health routes probes of node addresses to a local server answering 200 (healthy) or 503;
// an address it does not know refuses the connection. Only the dial is redirected: the
// prober's HTTP exchange is the real one.
type nodeHealth struct {
	mu      sync.Mutex
	healthy map[string]bool
	ok, bad *httptest.Server
	probed  map[string]int // port probed per address
}

func newHealth(t *testing.T) *nodeHealth {
	h := &nodeHealth{healthy: map[string]bool{}, probed: map[string]int{}}
	serve := func(code int) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/healthz" {
				code = http.StatusNotFound
			}
			w.WriteHeader(code)
		}))
		t.Cleanup(s.Close)
		return s
	}
	h.ok, h.bad = serve(http.StatusOK), serve(http.StatusServiceUnavailable)
	return h
}

func (h *nodeHealth) set(addr string, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.healthy[addr] = ok
}

func (h *nodeHealth) prober() HTTPProber {
	return HTTPProber{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, _ := net.SplitHostPort(addr)
		h.mu.Lock()
		ok, known := h.healthy[host]
		var p int
		for _, c := range port {
			p = p*10 + int(c-'0')
		}
		h.probed[host] = p
		h.mu.Unlock()
		if !known {
			return nil, errors.New("connection refused")
		}
		target := h.bad.Listener.Addr().String()
		if ok {
			target = h.ok.Listener.Addr().String()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, target)
	}}
}

type lbWorld struct {
	sim   *vcosim.Server
	api   *vco.Client
	sites []instances.Site
	ips   []string
}

func newLBWorld(t *testing.T, locations ...string) *lbWorld {
	t.Helper()
	sim := vcosim.NewTestServer(t, vcosim.Options{})
	w := &lbWorld{sim: sim, api: vcotest.Client(t, sim, vcosim.SeedClusterPrinc)}
	for i, loc := range locations {
		site := []string{names.PrimarySite, "west", "east"}[i]
		cs, _, err := w.api.EnsureCloudspace(context.Background(), vco.CreateCloudspaceRequest{Name: names.Cloudspace("team-a", "prod", site), Location: loc,
			PrivateNetwork: []string{"192.168.103.0/24", "192.168.104.0/24", "192.168.105.0/24"}[i]})
		if err != nil {
			t.Fatal(err)
		}
		w.sites = append(w.sites, instances.Site{Name: site, Location: loc, CloudspaceID: cs.ID})
		w.ips = append(w.ips, cs.ExternalNetworkIP)
	}
	return w
}

func (w *lbWorld) members(t *testing.T, site int, svc *corev1.Service) []string {
	t.Helper()
	var out []string
	for _, p := range w.sim.Snapshot().ServerPools {
		if p.CloudspaceID == w.sites[site].CloudspaceID && p.Name == PoolName("team-a", "prod", svc) {
			for _, h := range p.Hosts {
				out = append(out, h.Address)
			}
		}
	}
	return out
}

func (w *lbWorld) lbs(site int) []*vcosim.LoadBalancer {
	var out []*vcosim.LoadBalancer
	for _, lb := range w.sim.Snapshot().LoadBalancers {
		if lb.CloudspaceID == w.sites[site].CloudspaceID {
			out = append(out, lb)
		}
	}
	return out
}

func TestBalancerLifecycle(t *testing.T) {
	w := newLBWorld(t, vcosim.SeedLocation)
	h := newHealth(t)
	b := Balancer{Namespace: "team-a", Cluster: "prod", Prober: h.prober(), ClusterPolicyPort: 10256}
	ctx := context.Background()
	svc := service(corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP})
	nodes := []*corev1.Node{
		node("n1", "primary", "192.168.103.11", corev1.ConditionTrue),
		node("n2", "primary", "192.168.103.12", corev1.ConditionTrue),
		node("n3", "primary", "192.168.103.13", corev1.ConditionFalse),
	}
	h.set("192.168.103.11", true)
	h.set("192.168.103.12", false) // Ready, but kube-proxy says no
	h.set("192.168.103.13", true)  // healthy port, but NotReady

	if _, exists, err := b.Status(ctx, w.api, w.sites, svc); err != nil || exists {
		t.Fatalf("before: exists=%v %v", exists, err)
	}
	st, err := b.Ensure(ctx, w.api, w.sites, svc, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Ingress) != 1 || st.Ingress[0].IP != w.ips[0] {
		t.Fatalf("ingress = %v, want the cloudspace address %s", st.Ingress, w.ips[0])
	}
	if got := w.members(t, 0, svc); len(got) != 1 || got[0] != "192.168.103.11" {
		t.Fatalf("members = %v, want only the Ready node that answers", got)
	}
	if h.probed["192.168.103.11"] != 10256 || h.probed["192.168.103.13"] != 0 {
		t.Errorf("probed %v: Ready nodes on kube-proxy's port, NotReady ones not at all", h.probed)
	}
	lbs := w.lbs(0)
	if len(lbs) != 1 || lbs[0].FrontPort != 80 || lbs[0].TargetPort != 30080 || lbs[0].FrontIP != w.ips[0] {
		t.Fatalf("load balancers = %+v", lbs)
	}
	id := lbs[0].ID

	// Health changes reach the pool through SyncMembers alone.
	h.set("192.168.103.12", true)
	nodes[2].Status.Conditions[0].Status = corev1.ConditionTrue
	w.sim.ResetRequests()
	if err := b.SyncMembers(ctx, w.api, w.sites, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if got := w.members(t, 0, svc); len(got) != 3 {
		t.Fatalf("members after recovery = %v", got)
	}
	for _, r := range w.sim.Requests() {
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			t.Errorf("SyncMembers called %s %s", r.Method, r.Route)
		}
	}

	// Ports change in place: same load balancer, new numbers; a new port gets its own.
	svc.Spec.Ports[0].Port, svc.Spec.Ports[0].NodePort = 8080, 30081
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "dns", Port: 53, NodePort: 30053, Protocol: corev1.ProtocolUDP})
	if _, err := b.Ensure(ctx, w.api, w.sites, svc, nodes); err != nil {
		t.Fatal(err)
	}
	lbs = w.lbs(0)
	if len(lbs) != 2 {
		t.Fatalf("load balancers = %+v", lbs)
	}
	for _, lb := range lbs {
		switch lb.Name {
		case LoadBalancerName(PoolName("team-a", "prod", svc), svc.Spec.Ports[0]):
			if lb.ID != id || lb.FrontPort != 8080 || lb.TargetPort != 30081 {
				t.Errorf("http was not updated in place: %+v (was %s)", lb, id)
			}
		default:
			if lb.Type != "UDP" || lb.FrontPort != 53 {
				t.Errorf("dns: %+v", lb)
			}
		}
	}
	// Steady: a second Ensure changes nothing on the platform.
	w.sim.ResetRequests()
	if _, err := b.Ensure(ctx, w.api, w.sites, svc, nodes); err != nil {
		t.Fatal(err)
	}
	for _, r := range w.sim.Requests() {
		if r.Method != http.MethodGet {
			t.Errorf("a steady Ensure called %s %s", r.Method, r.Route)
		}
	}

	// Deleted with the Service: nothing left.
	if err := b.Delete(ctx, w.api, w.sites, svc); err != nil {
		t.Fatal(err)
	}
	snap := w.sim.Snapshot()
	if len(snap.LoadBalancers) != 0 || len(snap.ServerPools) != 0 {
		t.Fatalf("left behind: %d load balancers, %d pools", len(snap.LoadBalancers), len(snap.ServerPools))
	}
	if _, exists, err := b.Status(ctx, w.api, w.sites, svc); err != nil || exists {
		t.Fatalf("after delete: exists=%v %v", exists, err)
	}
	if err := b.Delete(ctx, w.api, w.sites, svc); err != nil {
		t.Fatalf("a second delete: %v", err)
	}
}

func TestBalancerGeo(t *testing.T) {
	w := newLBWorld(t, vcosim.SeedLocation, vcosim.SeedLocation2, vcosim.SeedLocation)
	h := newHealth(t)
	b := Balancer{Namespace: "team-a", Cluster: "prod", Prober: h.prober()}
	ctx := context.Background()
	svc := service(corev1.ServicePort{Port: 443, NodePort: 30443, Protocol: corev1.ProtocolTCP})
	svc.Spec.ExternalTrafficPolicy, svc.Spec.HealthCheckNodePort = corev1.ServiceExternalTrafficPolicyLocal, 31000
	nodes := []*corev1.Node{
		node("p1", "primary", "192.168.103.11", corev1.ConditionTrue),
		node("w1", "west", "192.168.104.11", corev1.ConditionTrue),
	}
	h.set("192.168.103.11", true)
	h.set("192.168.104.11", false) // no local endpoint in west
	st, err := b.Ensure(ctx, w.api, w.sites, svc, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Ingress) != 2 || st.Ingress[0].IP != w.ips[0] || st.Ingress[1].IP != w.ips[1] {
		t.Fatalf("ingress = %v, want the primary and west addresses %v", st.Ingress, w.ips[:2])
	}
	if h.probed["192.168.103.11"] != 31000 {
		t.Errorf("Local policy must probe healthCheckNodePort: %v", h.probed)
	}
	if m := w.members(t, 1, svc); len(m) != 0 {
		t.Errorf("west members = %v: its node has no local endpoint", m)
	}
	if len(w.lbs(2)) != 0 {
		t.Errorf("east has no nodes and got a load balancer")
	}
	// West's nodes go: west's load balancer goes, the primary's stays.
	if st, err = b.Ensure(ctx, w.api, w.sites, svc, nodes[:1]); err != nil || len(st.Ingress) != 1 {
		t.Fatalf("ingress = %v, %v", st, err)
	}
	if len(w.lbs(1)) != 0 || len(w.lbs(0)) != 1 {
		t.Errorf("west kept %d load balancers, primary has %d", len(w.lbs(1)), len(w.lbs(0)))
	}
	// No node anywhere: an error the service controller retries, not an empty address.
	if _, err := b.Ensure(ctx, w.api, w.sites, svc, nil); !errors.Is(err, ErrNoNodes) {
		t.Errorf("no nodes: %v", err)
	}
}

func TestBalancerPortConflict(t *testing.T) {
	w := newLBWorld(t, vcosim.SeedLocation)
	b := Balancer{Namespace: "team-a", Cluster: "prod", Prober: newHealth(t).prober()}
	ctx := context.Background()
	nodes := []*corev1.Node{node("n1", "primary", "192.168.103.11", corev1.ConditionTrue)}
	one := service(corev1.ServicePort{Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP})
	two := service(corev1.ServicePort{Port: 80, NodePort: 30081, Protocol: corev1.ProtocolTCP})
	two.Name = "other"
	if _, err := b.Ensure(ctx, w.api, w.sites, one, nodes); err != nil {
		t.Fatal(err)
	}
	_, err := b.Ensure(ctx, w.api, w.sites, two, nodes)
	if !errors.Is(err, vco.ErrConflict) {
		t.Fatalf("two Services on port 80 of one address: %v, want a conflict", err)
	}
	if err := b.Delete(ctx, w.api, w.sites, two); err != nil {
		t.Fatal(err)
	}
	if len(w.lbs(0)) != 1 || w.lbs(0)[0].Name != LoadBalancerName(PoolName("team-a", "prod", one), one.Spec.Ports[0]) {
		t.Errorf("deleting the refused Service touched the other: %+v", w.lbs(0))
	}
}
