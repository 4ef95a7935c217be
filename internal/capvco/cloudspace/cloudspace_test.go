package cloudspace_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capx-io/capx/internal/capvco/cloudspace"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

const name = "capvco_ns_c_primary"

func newClient(t *testing.T) (*vcosim.Server, *vco.Client) {
	t.Helper()
	sim := vcosim.NewTestServer(t, vcosim.Options{})
	tok, err := sim.Token(vcosim.SeedClusterPrinc, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := vco.New(vco.Credentials{URL: sim.APIURL(), Customer: vcosim.SeedCustomer, JWT: tok},
		vco.Options{BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	return sim, c
}

func request() vco.CreateCloudspaceRequest {
	return vco.CreateCloudspaceRequest{Name: name, Location: vcosim.SeedLocation}
}

// mutating lists the writes the simulator served.
func mutating(sim *vcosim.Server) []string {
	var out []string
	for _, r := range sim.Requests() {
		if r.Method != http.MethodGet && strings.HasPrefix(r.Route, "/api/1/") {
			out = append(out, r.Method+" "+r.Route)
		}
	}
	return out
}

// TestEnsure: what Ensure reports for each state the platform can be in, and what it writes.
func TestEnsure(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup prepares the platform and returns the id status knows ("" for none).
		setup   func(t *testing.T, api *vco.Client, sim *vcosim.Server) string
		adopted bool
		liveVMs int
		lost    bool
		writes  int
		errHas  string
	}{
		{name: "nothing there: created", setup: func(*testing.T, *vco.Client, *vcosim.Server) string { return "" }, writes: 1},
		{name: "known id: read, not written", setup: func(t *testing.T, api *vco.Client, _ *vcosim.Server) string {
			return ensure(t, api).ID
		}},
		{name: "same name, no id: adopted with its VMs counted", setup: func(t *testing.T, api *vco.Client, _ *vcosim.Server) string {
			cs := ensure(t, api)
			img, err := api.FindImage(context.Background(), vcosim.SeedLocation, vcosim.SeedImageName)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := api.CreateVM(context.Background(), cs.ID, vco.CreateVMRequest{Name: "w", VCPUs: 1, MemoryMiB: 1024, ImageID: img.ID}); err != nil {
				t.Fatal(err)
			}
			return ""
		}, adopted: true, liveVMs: 1},
		{name: "known id deleted out of band: lost, never recreated", setup: func(t *testing.T, api *vco.Client, _ *vcosim.Server) string {
			cs := ensure(t, api)
			if err := api.DeleteCloudspace(context.Background(), cs.ID, true); err != nil {
				t.Fatal(err)
			}
			return cs.ID
		}, lost: true},
		{name: "known id in the recycle bin: lost", setup: func(t *testing.T, api *vco.Client, _ *vcosim.Server) string {
			cs := ensure(t, api)
			if err := api.DeleteCloudspace(context.Background(), cs.ID, false); err != nil {
				t.Fatal(err)
			}
			return cs.ID
		}, lost: true},
		{name: "platform fails the read: error, no create", setup: func(t *testing.T, api *vco.Client, sim *vcosim.Server) string {
			id := ensure(t, api).ID
			sim.Faults().Add(vcosim.Fault{Route: "GET /customers/{customer_id}/cloudspaces/{cloudspace_id}", Status: http.StatusForbidden})
			return id
		}, errHas: "read cloudspace"},
		{name: "platform refuses the create: error", setup: func(_ *testing.T, _ *vco.Client, sim *vcosim.Server) string {
			sim.Faults().Add(vcosim.Fault{Route: "POST /customers/{customer_id}/cloudspaces", Status: http.StatusForbidden})
			return ""
		}, errHas: "ensure cloudspace " + name},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim, api := newClient(t)
			known := tc.setup(t, api, sim)
			sim.ResetRequests()
			got, err := cloudspace.Ensure(context.Background(), api, known, request())
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err = %v, want one containing %q", err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Adopted != tc.adopted || got.LiveVMs != tc.liveVMs || got.Lost != tc.lost {
				t.Errorf("adopted=%v liveVMs=%d lost=%v, want %v %d %v", got.Adopted, got.LiveVMs, got.Lost, tc.adopted, tc.liveVMs, tc.lost)
			}
			if !tc.lost && (got.Cloudspace.ID == "" || got.Cloudspace.Name != name) {
				t.Errorf("cloudspace = %+v", got.Cloudspace)
			}
			if tc.lost && got.Deployed() {
				t.Error("a lost cloudspace counts as deployed")
			}
			if w := mutating(sim); len(w) != tc.writes {
				t.Errorf("writes = %v, want %d", w, tc.writes)
			}
		})
	}
}

// TestDeployed: only a DEPLOYED cloudspace with an external address is usable.
func TestDeployed(t *testing.T) {
	for _, tc := range []struct {
		o    cloudspace.Observed
		want bool
	}{
		{cloudspace.Observed{Cloudspace: vco.Cloudspace{Status: "DEPLOYED", ExternalNetworkIP: "203.0.113.1"}}, true},
		{cloudspace.Observed{Cloudspace: vco.Cloudspace{Status: "deployed", ExternalNetworkIP: "203.0.113.1"}}, true},
		{cloudspace.Observed{Cloudspace: vco.Cloudspace{Status: "DEPLOYING", ExternalNetworkIP: "203.0.113.1"}}, false},
		{cloudspace.Observed{Cloudspace: vco.Cloudspace{Status: "DEPLOYED"}}, false},
		{cloudspace.Observed{Cloudspace: vco.Cloudspace{Status: "DEPLOYED", ExternalNetworkIP: "203.0.113.1"}, Lost: true}, false},
	} {
		if got := tc.o.Deployed(); got != tc.want {
			t.Errorf("%+v: Deployed = %v, want %v", tc.o, got, tc.want)
		}
	}
}

// TestDelete: permanent, by id or by name, done when nothing is left, an error otherwise.
func TestDelete(t *testing.T) {
	for _, tc := range []struct {
		name   string
		byID   bool
		create bool
		fault  *vcosim.Fault
		gone   bool
		errHas string
	}{
		{name: "by id", byID: true, create: true, gone: true},
		{name: "by name", create: true, gone: true},
		{name: "nothing of the name: gone", gone: true},
		{name: "id already gone: gone", byID: true, create: true, fault: &vcosim.Fault{Route: "DELETE /customers/{customer_id}/cloudspaces/{cloudspace_id}", Status: http.StatusNotFound}, gone: true},
		{name: "refused: retried later", byID: true, create: true, fault: &vcosim.Fault{Route: "DELETE /customers/{customer_id}/cloudspaces/{cloudspace_id}", Status: http.StatusConflict, Message: "Conflict: cloudspace busy"}, errHas: "cloudspace busy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim, api := newClient(t)
			id := ""
			if tc.create {
				id = ensure(t, api).ID
			}
			if !tc.byID {
				id = ""
			}
			if tc.fault != nil {
				sim.Faults().Add(*tc.fault)
			}
			gone, err := cloudspace.Delete(context.Background(), api, id, vcosim.SeedLocation, name)
			if gone != tc.gone || (tc.errHas == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.errHas)) {
				t.Fatalf("gone=%v err=%v, want gone=%v err containing %q", gone, err, tc.gone, tc.errHas)
			}
			if tc.fault != nil {
				return
			}
			for _, b := range sim.Billed() {
				if b.Name == name {
					t.Errorf("still billed (a soft delete keeps the address): %+v", b)
				}
			}
			if _, err := api.FindCloudspace(context.Background(), vcosim.SeedLocation, name); !errors.Is(err, vco.ErrNotFound) {
				t.Errorf("find after delete: %v", err)
			}
		})
	}
}

func ensure(t *testing.T, api *vco.Client) vco.Cloudspace {
	t.Helper()
	cs, _, err := api.EnsureCloudspace(context.Background(), request())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
