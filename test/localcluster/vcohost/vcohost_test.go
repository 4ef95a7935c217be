package vcohost

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/test/localcluster"
)

// TestMachine: a VM boots as a machine with its id, private address and user data, under its
// hostname, else its name.
func TestMachine(t *testing.T) {
	vm := vcosim.VMBoot{ID: 7, Name: "wl-md-0", Hostname: "wl-md-0-host", PrivateIP: "192.168.103.12", UserData: "#cloud-config\n"}
	want := localcluster.Machine{ID: 7, Hostname: "wl-md-0-host", IP: "192.168.103.12", UserData: "#cloud-config\n"}
	if got := Machine(vm); got != want {
		t.Errorf("Machine = %+v, want %+v", got, want)
	}
	vm.Hostname = ""
	if got := Machine(vm); got.Hostname != "wl-md-0" {
		t.Errorf("without a hostname the machine is called %q, want the VM's name", got.Hostname)
	}
}

// TestLoadBalancers: the router sees the simulator's TCP load balancers where they listen,
// with the pool's members at the target port as the pool is now.
func TestLoadBalancers(t *testing.T) {
	s := vcosim.NewTestServer(t, vcosim.Options{})
	jwt, err := s.Token(vcosim.SeedClusterPrinc, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	vc, err := vco.New(vco.Credentials{URL: s.APIURL(), Customer: vcosim.SeedCustomer, JWT: jwt}, vco.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cs, err := vc.CreateCloudspace(ctx, vco.CreateCloudspaceRequest{Name: "lb", Location: vcosim.SeedLocation})
	if err != nil {
		t.Fatal(err)
	}
	c, err := vc.GetCloudspace(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := vc.CreateServerPool(ctx, cs, "api", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vc.CreateLoadBalancer(ctx, cs, vco.LoadBalancerSpec{Name: "api", Type: "TCP",
		FrontEnd: vco.LBFrontEnd{Port: 6443, IPAddress: c.ExternalNetworkIP}, BackEnd: vco.LBBackEnd{ServerPoolID: pool, TargetPort: 16443}}); err != nil {
		t.Fatal(err)
	}
	lbs := LoadBalancers{Sim: s.Sim}
	front := netip.MustParseAddrPort(c.ExternalNetworkIP + ":6443")
	if got := lbs.Fronts(); !slices.Equal(got, []netip.AddrPort{front}) {
		t.Fatalf("Fronts = %v, want %v", got, front)
	}
	if got := lbs.Backends(front); len(got) != 0 {
		t.Errorf("an empty pool forwards to %v", got)
	}
	if _, err := vc.AddPoolHost(ctx, cs, pool, "192.168.103.11"); err != nil {
		t.Fatal(err)
	}
	if got := lbs.Backends(front); !slices.Equal(got, []string{"192.168.103.11:16443"}) {
		t.Errorf("Backends = %v, want the member at the target port", got)
	}
	if got := lbs.Backends(netip.MustParseAddrPort(c.ExternalNetworkIP + ":443")); got != nil {
		t.Errorf("nothing listens on :443, yet it forwards to %v", got)
	}
}
