//go:build e2e

package localcluster

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// staticLBs is one TCP load balancer whose members a test sets.
type staticLBs struct {
	mu      sync.Mutex
	front   netip.AddrPort
	members []string
}

func (s *staticLBs) Fronts() []netip.AddrPort { return []netip.AddrPort{s.front} }
func (s *staticLBs) Backends(f netip.AddrPort) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f != s.front {
		return nil
	}
	return slices.Clone(s.members)
}

// TestPlatformMachinesJoin boots a control-plane machine and a worker on a platform network
// from their bootstrap data and checks that both kubelets join through the load balancer's
// front end (the worker's only way to the API server) and register uninitialised Nodes with
// the machines' addresses, that a machine powered off leaves no namespace, process, mount or
// cgroup, that a machine stopped and booted again rejoins with the certificate it kept, and
// that the platform's teardown leaves nothing either.
func TestPlatformMachinesJoin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	const name = "ptest"
	_ = DownPlatform(ctx, PlatformOptions{Name: name})
	lbs := &staticLBs{front: netip.MustParseAddrPort("203.0.113.10:6443"), members: []string{"192.168.103.11:6443"}}
	p, err := UpPlatform(ctx, PlatformOptions{Name: name, Public: []string{"203.0.113.0/24"}, Private: []string{"192.168.103.0/24"}, LoadBalancers: lbs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Down(context.Background()); err != nil {
			t.Error(err)
		}
		if left, _ := Leftovers(Options{Name: name}); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
	secrets, err := NewClusterSecrets("wl")
	if err != nil {
		t.Fatal(err)
	}
	userData := func(role string) string {
		b, err := secrets.Bootstrap(role, "wl", lbs.front.String(), "10.96.0.0/16", "10.244.0.0/16").UserData()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	start := time.Now()
	p.Boot(Machine{ID: 11, Hostname: "wl-cp-0", IP: "192.168.103.11", UserData: userData(RoleControlPlane)})
	p.Boot(Machine{ID: 12, Hostname: "wl-md-0", IP: "192.168.103.12", UserData: userData(RoleWorker)})

	kc, err := secrets.AdminKubeconfig("wl", "https://"+lbs.front.String(), "test")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dial = p.DialContext
	cfg.Timeout = 10 * time.Second
	client := kubernetes.NewForConfigOrDie(cfg)
	deadline := time.Now().Add(10 * time.Minute)
	for {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		var got []string
		if err == nil {
			for _, n := range nodes.Items {
				got = append(got, fmt.Sprintf("%s %s tainted=%t", n.Name, internalIP(n), slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
					return t.Key == "node.cloudprovider.kubernetes.io/uninitialized"
				})))
			}
		}
		slices.Sort(got)
		want := []string{"wl-cp-0 192.168.103.11 tainted=true", "wl-md-0 192.168.103.12 tainted=true"}
		if slices.Equal(got, want) {
			t.Logf("both Nodes registered through the load balancer after %.0fs: %v", time.Since(start).Seconds(), got)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Nodes %v (%v), want %v; machines %+v", got, err, want, p.Machines())
		}
		for _, m := range p.Machines() {
			if m.State == MachineFailed {
				t.Fatalf("machine %d failed: %v", m.ID, m.Err)
			}
		}
		time.Sleep(2 * time.Second)
	}
	waitMachine(t, p, 11, MachineRunning)
	if cp, _ := p.MachineStatus(11); cp.Role != RoleControlPlane {
		t.Errorf("control plane machine: %+v", cp)
	}
	// A stop keeps the disk: the worker's namespace and processes go, and booted again it
	// comes back with the certificate it was signed, asking for no new one.
	csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Stop(12)
	waitMachine(t, p, 12, MachineStopped)
	if left := leftovers(p.machineLayout(12)); len(left) > 0 {
		t.Errorf("the stopped worker left %s", strings.Join(left, "; "))
	}
	p.Boot(Machine{ID: 12, Hostname: "wl-md-0", IP: "192.168.103.12", UserData: userData(RoleWorker)})
	waitMachine(t, p, 12, MachineRunning)
	rebooted := time.Now().Truncate(time.Second)
	deadline = time.Now().Add(3 * time.Minute)
	for {
		// Ready as reported by the kubelet that started after the reboot.
		n, err := client.CoreV1().Nodes().Get(ctx, "wl-md-0", metav1.GetOptions{})
		if err == nil && readySince(n, rebooted) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rebooted worker's Node is not Ready: %v", err)
		}
		time.Sleep(2 * time.Second)
	}
	after, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil || len(after.Items) != len(csrs.Items) {
		t.Errorf("CSRs before the reboot %d, after %d (%v): the rebooted kubelet should reuse its certificate", len(csrs.Items), len(after.Items), err)
	}
	p.Destroy(12)
	waitMachine(t, p, 12, MachineDestroyed)
	worker := p.machineLayout(12)
	if left := leftovers(worker); len(left) > 0 {
		t.Errorf("the destroyed worker left %s", strings.Join(left, "; "))
	}
}

func waitMachine(t *testing.T, p *Platform, id int, want MachineState) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		s, _ := p.MachineStatus(id)
		if s.State == want {
			return
		}
		if time.Now().After(deadline) || s.State == MachineFailed {
			t.Fatalf("machine %d: %+v, want %s", id, s, want)
		}
		time.Sleep(time.Second)
	}
}

// readySince: the Node's kubelet reported it Ready at or after t.
func readySince(n *corev1.Node, t time.Time) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue && !c.LastHeartbeatTime.Time.Before(t)
		}
	}
	return false
}

func internalIP(n corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	// With --cloud-provider=external the kubelet leaves the addresses to the CCM and records
	// the IP it was given in an annotation.
	return n.Annotations["alpha.kubernetes.io/provided-node-ip"]
}
