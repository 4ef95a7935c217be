package geo_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capx-io/capx/internal/capvco/geo"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

type fixture struct {
	sim     *vcosim.Server
	api     *vco.Client
	members []geo.Member
}

// newFixture makes n deployed cloudspaces alternating between the two seeded locations.
func newFixture(t *testing.T, n int, opts vcosim.Options) *fixture {
	t.Helper()
	sim := vcosim.NewTestServer(t, opts)
	tok, err := sim.Token(vcosim.SeedClusterPrinc, 0)
	if err != nil {
		t.Fatal(err)
	}
	api, err := vco.New(vco.Credentials{URL: sim.APIURL(), Customer: vcosim.SeedCustomer, JWT: tok},
		vco.Options{BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{sim: sim, api: api}
	ctx := context.Background()
	for i := range n {
		loc := []string{vcosim.SeedLocation, vcosim.SeedLocation2}[i%2]
		cs, _, err := api.EnsureCloudspace(ctx, vco.CreateCloudspaceRequest{Name: fmt.Sprintf("capvco_ns_c_s%d", i), Location: loc,
			PrivateNetwork: fmt.Sprintf("192.168.%d.0/24", 103+i)})
		if err != nil {
			t.Fatal(err)
		}
		for cs.ExternalNetworkIP == "" || cs.Status != "DEPLOYED" {
			time.Sleep(10 * time.Millisecond)
			if cs, err = api.GetCloudspace(ctx, cs.ID); err != nil {
				t.Fatal(err)
			}
		}
		f.members = append(f.members, geo.Member{Site: fmt.Sprintf("s%d", i), CloudspaceID: cs.ID, ExternalIP: cs.ExternalNetworkIP})
	}
	return f
}

func (f *fixture) writes() int {
	n := 0
	for _, r := range f.sim.Requests() {
		if r.Method != http.MethodGet && strings.HasPrefix(r.Route, "/api/1/") {
			n++
		}
	}
	return n
}

const connectRoute = "POST /customers/{customer_id}/cloudspaces/{cloudspace_id}/connected-cloudspaces"

// TestEnsure: a full mesh, each link made once, reported until its tunnel is up.
func TestEnsure(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sites    int
		linked   bool // Ensure ran before
		fault    *vcosim.Fault
		links    int
		writes   int
		errHas   string
		eventual bool // wait until connected
	}{
		{name: "two sites: one link", sites: 2, links: 1, writes: 1, eventual: true},
		{name: "three sites: a full mesh of three", sites: 3, links: 3, writes: 3, eventual: true},
		{name: "linked already: nothing written", sites: 3, linked: true, links: 3},
		{name: "a refused link is an error naming it", sites: 2, fault: &vcosim.Fault{Route: connectRoute, Status: http.StatusForbidden}, links: 1, writes: 1, errHas: "link s0<->s1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.sites, vcosim.Options{})
			ctx := context.Background()
			if tc.linked {
				if _, err := geo.Ensure(ctx, f.api, f.members); err != nil {
					t.Fatal(err)
				}
			}
			if tc.fault != nil {
				f.sim.Faults().Add(*tc.fault)
			}
			f.sim.ResetRequests()
			m, err := geo.Ensure(ctx, f.api, f.members)
			if (tc.errHas == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.errHas)) {
				t.Fatalf("err = %v, want one containing %q", err, tc.errHas)
			}
			if m.Links != tc.links || f.writes() != tc.writes {
				t.Fatalf("links=%d writes=%d, want %d and %d", m.Links, f.writes(), tc.links, tc.writes)
			}
			for tc.eventual && !m.Connected() {
				time.Sleep(20 * time.Millisecond)
				if m, err = geo.Ensure(ctx, f.api, f.members); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestDelete: links go; a link whose deletes keep failing with 400/500 is tolerated (the
// cloudspace delete removes it), any other refusal stops the teardown.
func TestDelete(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      vcosim.Options
		fault     *vcosim.Fault
		gone      bool // a cloudspace is gone before
		tolerated int
		errHas    string
	}{
		{name: "links removed"},
		{name: "flaky deletes tolerated after the attempts", opts: vcosim.Options{LinkDeleteFailureRate: 1, RandSeed: 1}, tolerated: 2},
		{name: "a 403 stops the teardown", fault: &vcosim.Fault{Route: "DELETE /customers/{customer_id}/cloudspaces/{cloudspace_id}/connected-cloudspaces/{connected_cloudspace_id}", Status: http.StatusForbidden}, errHas: "unlink s0"},
		{name: "a cloudspace that is gone has no links", gone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 2, tc.opts)
			ctx := context.Background()
			if _, err := geo.Ensure(ctx, f.api, f.members); err != nil {
				t.Fatal(err)
			}
			if tc.fault != nil {
				f.sim.Faults().Add(*tc.fault)
			}
			if tc.gone {
				if err := f.api.DeleteCloudspace(ctx, f.members[1].CloudspaceID, true); err != nil {
					t.Fatal(err)
				}
			}
			tolerated, err := geo.Delete(ctx, f.api, f.members)
			if (tc.errHas == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.errHas)) {
				t.Fatalf("err = %v, want one containing %q", err, tc.errHas)
			}
			if len(tolerated) != tc.tolerated {
				t.Fatalf("tolerated = %v, want %d", tolerated, tc.tolerated)
			}
			if err == nil && tc.tolerated == 0 {
				if links := f.sim.Snapshot().Links; len(links) != 0 {
					t.Fatalf("links left: %+v", links)
				}
			}
		})
	}
}
