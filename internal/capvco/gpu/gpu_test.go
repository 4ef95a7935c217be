package gpu_test

import (
	"context"
	"fmt"
	"net/http"
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

// softDelete deletes a reservation the way the portal does without "permanently": it lands in
// the recycle bin, detached and still billed. The client has no call for it on purpose.
func softDelete(t *testing.T, sim *vcosim.Server, id string) {
	t.Helper()
	tok, err := sim.Token(vcosim.SeedClusterPrinc, 0)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodDelete, sim.APIURL()+"/customers/"+vcosim.SeedCustomer+"/locations/"+loc+"/vgpus/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("soft delete of %s: %s", id, resp.Status)
	}
}

// TestEnsureUsesARecycledReservation: a live machine's reservation deleted in the portal
// without "permanently" sits in the recycle bin, detached and still billed. The machine's next
// Ensure must not reserve a second one next to it (two billed, one unused and hidden behind a
// live owner's name): it restores that one and attaches it.
func TestEnsureUsesARecycledReservation(t *testing.T) {
	sim, c := newClient(t)
	ctx := context.Background()
	cs, _, err := c.EnsureCloudspace(ctx, vco.CreateCloudspaceRequest{Name: "capvco_ns_c1_site-a", Location: loc})
	if err != nil {
		t.Fatal(err)
	}
	img, err := c.FindImage(ctx, loc, vcosim.SeedImageName)
	if err != nil {
		t.Fatal(err)
	}
	vmID, err := c.CreateVM(ctx, cs.ID, vco.CreateVMRequest{Name: "m1", VCPUs: 2, MemoryMiB: 2048, ImageID: img.ID})
	if err != nil {
		t.Fatal(err)
	}
	name := "capvco_ns_c1_m1_gpu_0"
	first, err := gpu.Ensure(ctx, c, loc, cs.ID, vmID, vcosim.SeedStubGPUProfile, []string{name})
	if err != nil || len(first) != 1 {
		t.Fatalf("%+v %v", first, err)
	}
	softDelete(t, sim, first[0].ID)

	again, err := gpu.Ensure(ctx, c, loc, cs.ID, vmID, vcosim.SeedStubGPUProfile, []string{name})
	if err != nil || len(again) != 1 {
		t.Fatalf("%+v %v", again, err)
	}
	var billedOfName []vcosim.Billed
	for _, b := range sim.Billed() {
		if b.Kind == "vgpu" && b.Name == name {
			billedOfName = append(billedOfName, b)
		}
	}
	if len(billedOfName) != 1 || billedOfName[0].ID != first[0].ID || billedOfName[0].InRecycleBin {
		t.Fatalf("billed reservations named %s: %+v, want only %s, restored", name, billedOfName, first[0].ID)
	}
	all, err := c.ListAllVGPUs(ctx, loc, vco.ListVGPUsOptions{IncludeDeleted: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range all {
		if v.ID == first[0].ID && (!v.Attached() || v.VM.ID != vmID || v.DeletionTime != nil) {
			t.Fatalf("the reservation is not back on its VM: %+v", v)
		}
	}
}
