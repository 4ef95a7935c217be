package vm_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/capx-io/capx/internal/capvco/vm"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/internal/vco/vcotest"
)

type fixture struct {
	sim *vcosim.Server
	api *vco.Client
	cs  string
	img int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	sim := vcosim.NewTestServer(t, vcosim.Options{})
	api := vcotest.Client(t, sim, vcosim.SeedClusterPrinc)
	cs, _, err := api.EnsureCloudspace(context.Background(), vco.CreateCloudspaceRequest{Name: "capvco_ns_c_primary", Location: vcosim.SeedLocation})
	if err != nil {
		t.Fatal(err)
	}
	img, err := api.FindImage(context.Background(), vcosim.SeedLocation, vcosim.SeedImageName)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{sim: sim, api: api, cs: cs.ID, img: img.ID}
}

func (f *fixture) vm(t *testing.T, name string) int {
	t.Helper()
	id, err := f.api.CreateVM(context.Background(), f.cs, vco.CreateVMRequest{Name: name, VCPUs: 1, MemoryMiB: 1024, ImageID: f.img})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// billed is what the simulator still bills for VMs.
func (f *fixture) billed() []string {
	var out []string
	for _, b := range f.sim.Billed() {
		if b.Kind == "vm" {
			out = append(out, fmt.Sprintf("%s %s (recycle bin %t)", b.ID, b.Name, b.InRecycleBin))
		}
	}
	return out
}

// TestDeleteFromTheRecycleBin: a VM the platform's default delete put in the recycle bin is
// still billed and cannot be stopped (the simulator answers 400, as the platform does); Delete
// purges it, found by id or by name, instead of failing on the stop forever. (Today's HEAD,
// 4d97e0c, failed on the stop by id, and by name called the recycled VM gone and left it.)
func TestDeleteFromTheRecycleBin(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	byID, byName, live := f.vm(t, "by-id"), f.vm(t, "by-name"), f.vm(t, "live")
	for _, id := range []int{byID, byName} {
		if err := f.api.DeleteVM(ctx, f.cs, id, vco.DeleteVMOptions{}); err != nil { // the platform's default: the recycle bin
			t.Fatal(err)
		}
	}
	if err := f.api.StopVM(ctx, f.cs, byID, true); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("stopping a VM in the recycle bin: want the platform's 400, got %v", err)
	}
	for _, tc := range []struct {
		id   int
		name string
	}{{byID, "by-id"}, {0, "by-name"}, {live, "live"}} {
		gone, err := vm.Delete(ctx, f.api, f.cs, tc.id, tc.name)
		if err != nil || !gone {
			t.Fatalf("%s: gone=%t, %v", tc.name, gone, err)
		}
	}
	if b := f.billed(); len(b) != 0 {
		t.Fatalf("VMs still billed: %v", b)
	}
	// Deleting again finds nothing and says so.
	if gone, err := vm.Delete(ctx, f.api, f.cs, byID, "by-id"); err != nil || !gone {
		t.Fatalf("second delete: gone=%t, %v", gone, err)
	}
}

// TestDeleteAllOfAName: without a known id, every VM of the machine's name goes, live or
// recycled (duplicates come from creates of unknown outcome).
func TestDeleteAllOfAName(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	first := f.vm(t, "dup")
	f.vm(t, "dup")
	other := f.vm(t, "other")
	if err := f.api.DeleteVM(ctx, f.cs, first, vco.DeleteVMOptions{}); err != nil {
		t.Fatal(err)
	}
	if gone, err := vm.Delete(ctx, f.api, f.cs, 0, "dup"); err != nil || !gone {
		t.Fatalf("gone=%t, %v", gone, err)
	}
	if b := f.billed(); len(b) != 1 || !strings.HasPrefix(b[0], fmt.Sprint(other)+" other") {
		t.Fatalf("billed: %v, want only VM %d", b, other)
	}
}

// TestDeleteStopRefused: a stop the platform refuses for a VM that is not in the recycle bin
// stays an error: nothing is deleted on a guess.
func TestDeleteStopRefused(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	id := f.vm(t, "stuck")
	f.sim.Faults().Add(vcosim.Fault{Route: "POST /customers/{customer_id}/cloudspaces/{cloudspace_id}/vms/{vm_id}/stop", Status: http.StatusBadRequest, Message: "Bad Request: VM is locked"})
	gone, err := vm.Delete(ctx, f.api, f.cs, id, "stuck")
	if gone || err == nil || !strings.Contains(err.Error(), "VM is locked") {
		t.Fatalf("gone=%t, %v", gone, err)
	}
	if b := f.billed(); len(b) != 1 {
		t.Fatalf("billed: %v", b)
	}
}
