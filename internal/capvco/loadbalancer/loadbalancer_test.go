package loadbalancer_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capx-io/capx/internal/capvco/loadbalancer"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

const name = "capvco_ns_c_apiserver"

type fixture struct {
	sim  *vcosim.Server
	api  *vco.Client
	cs   string
	addr string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	sim := vcosim.NewTestServer(t, vcosim.Options{})
	tok, err := sim.Token(vcosim.SeedClusterPrinc, 0)
	if err != nil {
		t.Fatal(err)
	}
	api, err := vco.New(vco.Credentials{URL: sim.APIURL(), Customer: vcosim.SeedCustomer, JWT: tok},
		vco.Options{BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cs, _, err := api.EnsureCloudspace(ctx, vco.CreateCloudspaceRequest{Name: "capvco_ns_c_primary", Location: vcosim.SeedLocation})
	if err != nil {
		t.Fatal(err)
	}
	for cs.ExternalNetworkIP == "" || cs.Status != "DEPLOYED" {
		time.Sleep(10 * time.Millisecond)
		if cs, err = api.GetCloudspace(ctx, cs.ID); err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{sim: sim, api: api, cs: cs.ID, addr: cs.ExternalNetworkIP}
}

func (f *fixture) writes() []string {
	var out []string
	for _, r := range f.sim.Requests() {
		if r.Method != http.MethodGet && strings.HasPrefix(r.Route, "/api/1/") {
			out = append(out, r.Method+" "+r.Route)
		}
	}
	return out
}

func (f *fixture) ensure(t *testing.T, known loadbalancer.Known) (vco.LoadBalancer, vco.ServerPool) {
	t.Helper()
	lb, pool, err := loadbalancer.Ensure(context.Background(), f.api, f.cs, name, f.addr, 6443, known)
	if err != nil {
		t.Fatal(err)
	}
	return lb, pool
}

// TestEnsure: the endpoint is found by its recorded ids at no write, converges by name when it
// changed or went, and is created once.
func TestEnsure(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup returns the ids status knows.
		setup  func(t *testing.T, f *fixture) loadbalancer.Known
		writes int
		same   bool // the ids are the recorded ones
	}{
		{name: "nothing: pool and load balancer created", setup: func(*testing.T, *fixture) loadbalancer.Known { return loadbalancer.Known{} }, writes: 2},
		{name: "recorded ids: read only", setup: func(t *testing.T, f *fixture) loadbalancer.Known {
			lb, pool := f.ensure(t, loadbalancer.Known{})
			return loadbalancer.Known{LoadBalancerID: lb.ID, ServerPoolID: pool.ID}
		}, same: true},
		{name: "no ids, same names: adopted, nothing written", setup: func(t *testing.T, f *fixture) loadbalancer.Known {
			f.ensure(t, loadbalancer.Known{})
			return loadbalancer.Known{}
		}},
		{name: "recorded load balancer deleted out of band: recreated by name", setup: func(t *testing.T, f *fixture) loadbalancer.Known {
			lb, pool := f.ensure(t, loadbalancer.Known{})
			if err := f.api.DeleteLoadBalancer(context.Background(), f.cs, lb.ID); err != nil {
				t.Fatal(err)
			}
			return loadbalancer.Known{LoadBalancerID: lb.ID, ServerPoolID: pool.ID}
		}, writes: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			known := tc.setup(t, f)
			f.sim.ResetRequests()
			lb, pool := f.ensure(t, known)
			if lb.BackEnd.ServerPoolID != pool.ID || lb.FrontEnd.Port != 6443 || lb.FrontEnd.IPAddress != f.addr || lb.BackEnd.TargetPort != 6443 {
				t.Errorf("load balancer %+v does not forward %s:6443 to pool %s:6443", lb, f.addr, pool.ID)
			}
			if w := f.writes(); len(w) != tc.writes {
				t.Errorf("writes = %v, want %d", w, tc.writes)
			}
			if tc.same && (lb.ID != known.LoadBalancerID || pool.ID != known.ServerPoolID) {
				t.Errorf("ids %s/%s, want the recorded %+v", lb.ID, pool.ID, known)
			}
		})
	}
}

// TestSyncMembers: the pool's hosts become exactly the healthy addresses; a steady pool costs
// no write; a failing write is reported and the others still happen.
func TestSyncMembers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		have    []string
		healthy []string
		fault   *vcosim.Fault
		want    []string
		writes  int
		errHas  string
	}{
		{name: "empty pool gains the healthy", healthy: []string{"192.168.103.11", "192.168.103.10"}, want: []string{"192.168.103.10", "192.168.103.11"}, writes: 2},
		{name: "steady: no write", have: []string{"192.168.103.10"}, healthy: []string{"192.168.103.10"}, want: []string{"192.168.103.10"}},
		{name: "unhealthy leaves", have: []string{"192.168.103.10", "192.168.103.11"}, healthy: []string{"192.168.103.11"}, want: []string{"192.168.103.11"}, writes: 1},
		{name: "none healthy: empty pool", have: []string{"192.168.103.10"}, want: []string{}, writes: 1},
		{name: "a failing add is reported, the removal still happens", have: []string{"192.168.103.10"}, healthy: []string{"192.168.103.11"},
			fault: &vcosim.Fault{Route: "POST /customers/{customer_id}/cloudspaces/{cloudspace_id}/ingress/server-pools/{serverpool_id}/hosts", Status: http.StatusForbidden},
			want:  []string{}, writes: 2, errHas: "add 192.168.103.11"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			_, pool := f.ensure(t, loadbalancer.Known{})
			for _, a := range tc.have {
				if _, err := f.api.AddPoolHost(ctx, f.cs, pool.ID, a); err != nil {
					t.Fatal(err)
				}
			}
			pool, err := f.api.GetServerPool(ctx, f.cs, pool.ID)
			if err != nil {
				t.Fatal(err)
			}
			if tc.fault != nil {
				f.sim.Faults().Add(*tc.fault)
			}
			f.sim.ResetRequests()
			members, err := loadbalancer.SyncMembers(ctx, f.api, f.cs, pool, tc.healthy)
			if (tc.errHas == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.errHas)) {
				t.Fatalf("err = %v, want one containing %q", err, tc.errHas)
			}
			if !slices.Equal(members, tc.want) {
				t.Errorf("members = %v, want %v", members, tc.want)
			}
			if w := f.writes(); len(w) != tc.writes {
				t.Errorf("writes = %v, want %d", w, tc.writes)
			}
			after, err := f.api.GetServerPool(ctx, f.cs, pool.ID)
			if err != nil {
				t.Fatal(err)
			}
			var hosts []string
			for _, h := range after.Hosts {
				hosts = append(hosts, h.Address)
			}
			slices.Sort(hosts)
			if !slices.Equal(hosts, tc.want) && !(len(hosts) == 0 && len(tc.want) == 0) {
				t.Errorf("platform pool = %v, reported %v", hosts, tc.want)
			}
		})
	}
}

// TestDelete: every load balancer and pool of the name goes, others stay; a cloudspace that is
// gone has nothing left.
func TestDelete(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.ensure(t, loadbalancer.Known{})
	if _, _, err := f.api.EnsureServerPool(ctx, f.cs, "someone-elses", ""); err != nil {
		t.Fatal(err)
	}
	if gone, err := loadbalancer.Delete(ctx, f.api, f.cs, name); err != nil || !gone {
		t.Fatalf("gone=%v, %v", gone, err)
	}
	snap := f.sim.Snapshot()
	if len(snap.LoadBalancers) != 0 || len(snap.ServerPools) != 1 || snap.ServerPools[0].Name != "someone-elses" {
		t.Fatalf("left: %d load balancers, pools %+v", len(snap.LoadBalancers), snap.ServerPools)
	}
	if err := f.api.DeleteCloudspace(ctx, f.cs, true); err != nil {
		t.Fatal(err)
	}
	if gone, err := loadbalancer.Delete(ctx, f.api, f.cs, name); err != nil || !gone {
		t.Fatalf("after the cloudspace: gone=%v, %v", gone, err)
	}
	f.sim.Faults().Add(vcosim.Fault{Route: "GET /customers/{customer_id}/cloudspaces/{cloudspace_id}/ingress/load-balancers", Status: http.StatusForbidden})
	if gone, err := loadbalancer.Delete(ctx, f.api, f.cs, name); err == nil || gone {
		t.Fatalf("a refused list: gone=%v, %v", gone, err)
	}
}
