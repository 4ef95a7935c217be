package servicelb

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/capx-io/capx/internal/vco"
)

func service(ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports}}
}

func TestNames(t *testing.T) {
	pool := PoolName("team-a", "prod", service())
	if pool != "capvco_team-a_prod_svc_shop_web" {
		t.Fatalf("PoolName = %q", pool)
	}
	if got := LoadBalancerName(pool, corev1.ServicePort{Name: "https"}); got != pool+"_https" {
		t.Errorf("LoadBalancerName = %q", got)
	}
	if got := LoadBalancerName(pool, corev1.ServicePort{}); got != pool+"_default" {
		t.Errorf("unnamed port: %q", got)
	}
	for name, want := range map[string]bool{
		pool + "_https": true, pool + "_default": true, pool: false, pool + "_": false,
		"capvco_team-a_prod_svc_shop_web-2_https": false, // another Service whose name extends this one
		pool + "_x_y":                  false,
		"capvco_team-a_prod_apiserver": false,
	} {
		if Owned(pool, name) != want {
			t.Errorf("Owned(%q) = %v", name, !want)
		}
	}
}

func TestUnsupported(t *testing.T) {
	if err := Unsupported(service(corev1.ServicePort{Port: 80, Protocol: corev1.ProtocolTCP})); err != nil {
		t.Fatalf("a plain Service: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*corev1.Service)
		want string
	}{
		{"source ranges", func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"} }, "spec.loadBalancerSourceRanges"},
		{"affinity", func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }, "spec.sessionAffinity"},
		{"no node ports", func(s *corev1.Service) { s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false) }, "allocateLoadBalancerNodePorts"},
		{"ip", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "203.0.113.7" }, "spec.loadBalancerIP"},
		{"sctp", func(s *corev1.Service) { s.Spec.Ports[0].Protocol = corev1.ProtocolSCTP }, "protocol SCTP"},
	} {
		s := service(corev1.ServicePort{Name: "p", Port: 80, Protocol: corev1.ProtocolTCP})
		tc.edit(s)
		if err := Unsupported(s); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "shop/web") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestListeners(t *testing.T) {
	s := service(corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP},
		corev1.ServicePort{Name: "dns", Port: 53, NodePort: 30053, Protocol: corev1.ProtocolUDP})
	got, err := Listeners(s, "pool", "sp-1", "203.0.113.10")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "pool_http" || got[0].Type != "TCP" || got[0].FrontEnd != (vco.LBFrontEnd{Port: 80, IPAddress: "203.0.113.10"}) ||
		got[0].BackEnd != (vco.LBBackEnd{ServerPoolID: "sp-1", TargetPort: 30080}) || got[1].Type != "UDP" || got[1].BackEnd.TargetPort != 30053 {
		t.Errorf("Listeners = %+v", got)
	}
	s.Spec.Ports[1].NodePort = 0
	if _, err := Listeners(s, "pool", "sp-1", "ip"); err == nil || !strings.Contains(err.Error(), "dns has no nodePort") {
		t.Errorf("no nodePort: %v", err)
	}
}

func TestPortDiff(t *testing.T) {
	spec := func(name string, port, target int) vco.LoadBalancerSpec {
		return vco.LoadBalancerSpec{Name: name, Type: "TCP", FrontEnd: vco.LBFrontEnd{Port: port, IPAddress: "ip"}, BackEnd: vco.LBBackEnd{ServerPoolID: "sp", TargetPort: target}}
	}
	lb := func(id, name string, port, target int) vco.LoadBalancer {
		s := spec(name, port, target)
		return vco.LoadBalancer{ID: id, Name: name, Type: "tcp", FrontEnd: s.FrontEnd, BackEnd: s.BackEnd}
	}
	for _, tc := range []struct {
		name     string
		existing []vco.LoadBalancer
		want     []vco.LoadBalancerSpec
		create   []string
		update   []string
		remove   []string
	}{
		{"steady", []vco.LoadBalancer{lb("1", "a", 80, 30080)}, []vco.LoadBalancerSpec{spec("a", 80, 30080)}, nil, nil, nil},
		{"new", nil, []vco.LoadBalancerSpec{spec("a", 80, 30080)}, []string{"a"}, nil, nil},
		{"nodePort changed: in place", []vco.LoadBalancer{lb("1", "a", 80, 30080)}, []vco.LoadBalancerSpec{spec("a", 80, 30081)}, nil, []string{"1"}, nil},
		{"port number changed: in place", []vco.LoadBalancer{lb("1", "a", 80, 30080)}, []vco.LoadBalancerSpec{spec("a", 8080, 30080)}, nil, []string{"1"}, nil},
		{"protocol changed: in place", []vco.LoadBalancer{lb("1", "a", 80, 30080)}, []vco.LoadBalancerSpec{func() vco.LoadBalancerSpec { s := spec("a", 80, 30080); s.Type = "UDP"; return s }()}, nil, []string{"1"}, nil},
		{"port removed", []vco.LoadBalancer{lb("1", "a", 80, 30080), lb("2", "b", 443, 30443)}, []vco.LoadBalancerSpec{spec("a", 80, 30080)}, nil, nil, []string{"2"}},
		{"duplicate from a lost create", []vco.LoadBalancer{lb("1", "a", 80, 30080), lb("2", "a", 80, 30080)}, []vco.LoadBalancerSpec{spec("a", 80, 30080)}, nil, nil, []string{"2"}},
		{"everything", []vco.LoadBalancer{lb("1", "a", 80, 30080), lb("2", "gone", 81, 30081)}, []vco.LoadBalancerSpec{spec("a", 80, 30090), spec("c", 82, 30082)}, []string{"c"}, []string{"1"}, []string{"2"}},
	} {
		c, u, r := PortDiff(tc.existing, tc.want)
		var cn, un, rn []string
		for _, x := range c {
			cn = append(cn, x.Name)
		}
		for _, x := range u {
			un = append(un, x.ID)
		}
		for _, x := range r {
			rn = append(rn, x.ID)
		}
		if !reflect.DeepEqual(cn, tc.create) || !reflect.DeepEqual(un, tc.update) || !reflect.DeepEqual(rn, tc.remove) {
			t.Errorf("%s: create %v update %v remove %v, want %v %v %v", tc.name, cn, un, rn, tc.create, tc.update, tc.remove)
		}
	}
}

func node(name, zone, ip string, ready corev1.ConditionStatus, edit ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if zone != "" {
		n.Labels[corev1.LabelTopologyZone] = zone
	}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
	}
	if ready != "" {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
	}
	for _, e := range edit {
		e(n)
	}
	return n
}

func TestCandidates(t *testing.T) {
	now := metav1.Now()
	nodes := []*corev1.Node{
		node("b", "primary", "10.0.0.2", corev1.ConditionTrue),
		node("a", "primary", "10.0.0.1", corev1.ConditionFalse),
		node("c", "primary", "10.0.0.3", ""),
		node("west", "west", "10.1.0.1", corev1.ConditionTrue),
		node("uninitialised", "", "10.0.0.9", corev1.ConditionTrue),
		node("no-address", "primary", "", corev1.ConditionTrue),
		node("deleting", "primary", "10.0.0.4", corev1.ConditionTrue, func(n *corev1.Node) { n.DeletionTimestamp = &now }),
		node("excluded", "primary", "10.0.0.5", corev1.ConditionTrue, func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "true" }),
		node("excluded-garbled", "primary", "10.0.0.6", corev1.ConditionTrue, func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "maybe" }),
		node("included", "primary", "10.0.0.7", corev1.ConditionTrue, func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "false" }),
		node("autoscaled-away", "primary", "10.0.0.8", corev1.ConditionTrue, func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: toBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule}}
		}),
	}
	got := Candidates(nodes, "primary")
	want := []Candidate{{"a", "10.0.0.1", false}, {"b", "10.0.0.2", true}, {"c", "10.0.0.3", false}, {"included", "10.0.0.7", true}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Candidates = %v\nwant %v", got, want)
	}
	if p := ProbeSet(got); !reflect.DeepEqual(p, []string{"10.0.0.2", "10.0.0.7"}) {
		t.Errorf("ProbeSet = %v: only Ready nodes are probed", p)
	}
	if w := Candidates(nodes, "west"); len(w) != 1 || w[0].Node != "west" {
		t.Errorf("west: %v", w)
	}
	if Candidates(nodes, "nowhere") != nil {
		t.Error("a site without nodes has candidates")
	}
}

func TestHealthPort(t *testing.T) {
	s := service()
	if HealthPort(s, 10256) != 10256 || HealthPort(s, 0) != 0 {
		t.Error("Cluster policy uses kube-proxy's port")
	}
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	s.Spec.HealthCheckNodePort = 31999
	if HealthPort(s, 10256) != 31999 || HealthPort(s, 0) != 31999 {
		t.Error("Local policy uses the Service's healthCheckNodePort")
	}
}
