package vcosim

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
)

type vmHostRecorder struct{ log []string }

func (r *vmHostRecorder) Running(vm VMBoot) {
	r.log = append(r.log, fmt.Sprintf("running %d %s %s %s %s %q", vm.ID, vm.Hostname, vm.Location, vm.Network, vm.PrivateIP, vm.UserData))
}
func (r *vmHostRecorder) Stopped(id int)   { r.log = append(r.log, fmt.Sprintf("stopped %d", id)) }
func (r *vmHostRecorder) Destroyed(id int) { r.log = append(r.log, fmt.Sprintf("destroyed %d", id)) }

// testCloudspace creates a public cloudspace and returns its id and the location's Ubuntu image.
func testCloudspace(t *testing.T, s *Server, tok string) (string, int) {
	t.Helper()
	code, body := do(t, s, "POST", "/api/1/customers/acme/cloudspaces", tok, `{"name":"h","location":"`+SeedLocation+`","firewall":{"private":false}}`)
	if code != 200 {
		t.Fatalf("cloudspace: %d %s", code, body)
	}
	var cs struct {
		ID string `json:"cloudspace_id"`
	}
	_ = json.Unmarshal([]byte(body), &cs)
	for _, i := range s.Snapshot().Images {
		if i.Location == SeedLocation && i.Name == SeedImageName {
			return cs.ID, i.ID
		}
	}
	t.Fatal("no seeded image")
	return "", 0
}

// TestVMHostSeesEveryPowerChange: the harness hears of a VM when it starts running (with what
// it boots with), when it stops (halt, recycle bin) and when it is gone for good (a permanent
// delete, or its cloudspace's), once each; a halted VM created without start_vm boots only
// when started, and a repeated start or stop is no news.
func TestVMHostSeesEveryPowerChange(t *testing.T) {
	s := NewTestServer(t, Options{})
	h := &vmHostRecorder{}
	s.SetVMHost(h)
	tok := token(t, s, SeedClusterPrinc)
	cs, img := testCloudspace(t, s, tok)
	vms := "/api/1/customers/acme/cloudspaces/" + cs + "/vms"
	create := func(name string, start bool) string {
		q := url.Values{"name": {name}, "hostname": {name + "-host"}, "description": {name}, "vcpus": {"1"}, "memory": {"1024"},
			"image_id": {itoaTest(img)}, "start_vm": {fmt.Sprint(start)}}
		code, body := do(t, s, "POST", vms+"?"+q.Encode(), tok, `{"userdata":{"runcmd":["echo `+name+`"]}}`)
		if code != 200 {
			t.Fatalf("create %s: %d %s", name, code, body)
		}
		var out struct {
			ID int `json:"vm_id"`
		}
		_ = json.Unmarshal([]byte(body), &out)
		return fmt.Sprint(out.ID)
	}
	a := create("a", true)
	b := create("b", false)
	for _, step := range []struct{ method, path string }{
		{"POST", vms + "/" + a + "/stop"}, {"POST", vms + "/" + a + "/stop"},
		{"POST", vms + "/" + a + "/start"}, {"POST", vms + "/" + a + "/start"},
		{"POST", vms + "/" + b + "/start"},
		{"DELETE", vms + "/" + a},
		{"DELETE", vms + "/" + a + "?permanently=true"},
		{"POST", vms + "/" + b + "/stop"},
		{"DELETE", vms + "/" + b},
		{"DELETE", "/api/1/customers/acme/cloudspaces/" + cs + "?permanently=true"},
	} {
		if code, body := do(t, s, step.method, step.path, tok, ""); code != 200 {
			t.Fatalf("%s %s: %d %s", step.method, step.path, code, body)
		}
	}
	boot := func(id, name string) string {
		return fmt.Sprintf("running %s %s-host %s 192.168.103.0/24 %s %q", id, name, SeedLocation, privateIPOf(s, id), "#cloud-config\nruncmd:\n- echo "+name+"\n")
	}
	want := []string{boot(a, "a"), "stopped " + a, boot(a, "a"), boot(b, "b"), "stopped " + a, "destroyed " + a,
		"stopped " + b, "destroyed " + b}
	if !slices.Equal(h.log, want) {
		t.Errorf("the harness heard\n  %s\nwant\n  %s", strings.Join(h.log, "\n  "), strings.Join(want, "\n  "))
	}
}

func privateIPOf(s *Server, id string) string {
	for _, vm := range s.Snapshot().VMs {
		if fmt.Sprint(vm.ID) == id {
			return vm.PrivateIP
		}
	}
	return ""
}

// TestTCPLoadBalancerTraffic: a harness finds where each TCP load balancer listens (its front
// address, else every external address of its cloudspace) and the members it forwards to at
// the target port, following the pool; UDP balancers and deleted cloudspaces listen nowhere.
func TestTCPLoadBalancerTraffic(t *testing.T) {
	s := NewTestServer(t, Options{})
	tok := token(t, s, SeedClusterPrinc)
	cs, _ := testCloudspace(t, s, tok)
	base := "/api/1/customers/acme/cloudspaces/" + cs + "/ingress"
	_, body := do(t, s, "POST", base+"/server-pools?name=p", tok, "")
	var pool struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal([]byte(body), &pool)
	ip := ""
	for _, c := range s.Snapshot().Cloudspaces {
		ip = c.PrimaryIP()
	}
	lb := func(name, typ, front string, port int) {
		b := fmt.Sprintf(`{"name":%q,"type":%q,"front_end":{"port":%d,"ip_address":%q},"back_end":{"serverpool_id":%q,"target_port":6443}}`, name, typ, port, front, pool.ID)
		if code, out := do(t, s, "POST", base+"/load-balancers", tok, b); code != 200 {
			t.Fatalf("load balancer %s: %d %s", name, code, out)
		}
	}
	lb("api", "TCP", ip, 6443)
	lb("any", "TCP", "", 8443)
	lb("dns", "UDP", ip, 53)
	fronts := s.TCPLoadBalancerFronts()
	if len(fronts) != 2 || !slices.Contains(fronts, LBFront{IP: ip, Port: 6443}) || !slices.Contains(fronts, LBFront{IP: ip, Port: 8443}) {
		t.Fatalf("fronts = %v, want %s:6443 and %s:8443", fronts, ip, ip)
	}
	if got, ok := s.TCPLoadBalancerBackends(LBFront{IP: ip, Port: 6443}); !ok || len(got) != 0 {
		t.Errorf("an empty pool forwards to %v (listening: %t)", got, ok)
	}
	do(t, s, "POST", base+"/server-pools/"+pool.ID+"/hosts?address=192.168.103.11", tok, "")
	do(t, s, "POST", base+"/server-pools/"+pool.ID+"/hosts?address=192.168.103.12", tok, "")
	if got, _ := s.TCPLoadBalancerBackends(LBFront{IP: ip, Port: 8443}); !slices.Equal(got, []string{"192.168.103.11:6443", "192.168.103.12:6443"}) {
		t.Errorf("backends = %v", got)
	}
	if _, ok := s.TCPLoadBalancerBackends(LBFront{IP: ip, Port: 53}); ok {
		t.Error("a UDP load balancer carries TCP")
	}
	do(t, s, "DELETE", "/api/1/customers/acme/cloudspaces/"+cs, tok, "")
	if fronts := s.TCPLoadBalancerFronts(); len(fronts) != 0 {
		t.Errorf("a deleted cloudspace still listens on %v", fronts)
	}
}
