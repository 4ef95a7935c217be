package gpu_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/capx-io/capx/internal/capvco/gpu"
	"github.com/capx-io/capx/internal/capvco/gpuname"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

const loc = vcosim.SeedLocation

func newClient(t *testing.T) (*vcosim.Server, *vco.Client) {
	t.Helper()
	sim := vcosim.NewTestServer(t, vcosim.Options{})
	tok, err := sim.Token(vcosim.SeedClusterPrinc, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := vco.New(vco.Credentials{URL: sim.APIURL(), Customer: vcosim.SeedCustomer, JWT: tok, IAMURL: sim.IAMURL()},
		vco.Options{BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	return sim, c
}

func billed(sim *vcosim.Server) map[string]bool {
	out := map[string]bool{}
	for _, b := range sim.Billed() {
		if b.Kind == "vgpu" {
			out[b.ID] = true
		}
	}
	return out
}

// TestReleaseUnderChurn: a cluster teardown releases every reservation of the cluster while
// another team releases and reserves between the listing's pages (driven by the simulator
// before every page): the one on the page boundary is not left behind, billed.
func TestReleaseUnderChurn(t *testing.T) {
	sim, c := newClient(t)
	names := make([]string, 0, vco.DefaultVGPUPageSize+20)
	for i := range vco.DefaultVGPUPageSize {
		names = append(names, fmt.Sprintf("team-b-%d", i))
	}
	for i := range 10 { // the first on the second page of the default size, then every other
		names = append(names, fmt.Sprintf("capvco_ns_c1_m%d_gpu_0", i), fmt.Sprintf("team-b-x%d", i))
	}
	ids, err := sim.ReserveVGPUs(vcosim.SeedCustomer, loc, vcosim.SeedStubGPUProfile, names...)
	if err != nil {
		t.Fatal(err)
	}
	sim.SetVGPUListHook(vcosim.TeamChurn("team-b-", 1, 1))
	released, err := gpu.Release(context.Background(), c, loc, func(n string) bool { return gpuname.OwnedByCluster(n, "ns", "c1") })
	if err != nil {
		t.Fatal(err)
	}
	left := billed(sim)
	for i, n := range names {
		if gpuname.OwnedByCluster(n, "ns", "c1") && left[ids[i]] {
			t.Errorf("%s (%s) is still billed after the teardown (released %v)", n, ids[i], released)
		}
	}
}
