package gpu_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/capx-io/capx/internal/capvco/gpu"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// TestAttachedTo: the VM's devices alone say whether every recorded reservation is attached.
func TestAttachedTo(t *testing.T) {
	v := vco.VM{Devices: []vco.Device{{ReferenceID: "g1"}, {ReferenceID: "g2"}}}
	for _, tc := range []struct {
		ids  []string
		want bool
	}{
		{[]string{"g1", "g2"}, true},
		{[]string{"g2"}, true},
		{[]string{"g1", "g3"}, false},
		{[]string{""}, false},
		{nil, true},
	} {
		if got := gpu.AttachedTo(v, tc.ids); got != tc.want {
			t.Errorf("AttachedTo(%v) = %v, want %v", tc.ids, got, tc.want)
		}
	}
}

// TestEnsureAndRelease: each name is one reservation attached to the VM, made once; Release
// takes only the owner's, permanently; a refused reservation is an error naming it.
func TestEnsureAndRelease(t *testing.T) {
	for _, tc := range []struct {
		name     string
		names    []string
		again    bool
		fault    *vcosim.Fault
		reserved int
		errHas   string
	}{
		{name: "two reservations", names: []string{"capvco_ns_c1_m1_gpu_0", "capvco_ns_c1_m1_gpu_1"}, reserved: 2},
		{name: "ensured twice: still two", names: []string{"capvco_ns_c1_m1_gpu_0", "capvco_ns_c1_m1_gpu_1"}, again: true, reserved: 2},
		{name: "refused: named in the error", names: []string{"capvco_ns_c1_m1_gpu_0"},
			fault: &vcosim.Fault{Route: "POST /customers/{customer_id}/cloudspaces/{cloudspace_id}/vms/{vm_id}/gpus/{gpu_id}", Status: http.StatusForbidden}, errHas: "vGPU capvco_ns_c1_m1_gpu_0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
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
			if _, err := sim.ReserveVGPUs(vcosim.SeedCustomer, loc, vcosim.SeedStubGPUProfile, "team-b-0"); err != nil {
				t.Fatal(err)
			}
			if tc.fault != nil {
				sim.Faults().Add(*tc.fault)
			}
			got, err := gpu.Ensure(ctx, c, loc, cs.ID, vmID, vcosim.SeedStubGPUProfile, tc.names)
			if tc.again && err == nil {
				got, err = gpu.Ensure(ctx, c, loc, cs.ID, vmID, vcosim.SeedStubGPUProfile, tc.names)
			}
			if (tc.errHas == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.errHas)) {
				t.Fatalf("err = %v, want %q", err, tc.errHas)
			}
			if len(got) != tc.reserved {
				t.Fatalf("got %d reservations, want %d", len(got), tc.reserved)
			}
			for _, g := range got {
				if !g.Attached() || g.VM.ID != vmID {
					t.Errorf("%s not attached to VM %d: %+v", g.Name, vmID, g)
				}
			}
			if n := len(billed(sim)); n != tc.reserved+1 {
				t.Fatalf("billed %d, want %d", n, tc.reserved+1)
			}
			released, err := gpu.Release(ctx, c, loc, func(n string) bool { return strings.HasPrefix(n, "capvco_ns_c1_m1_") })
			if err != nil || len(released) != tc.reserved {
				t.Fatalf("released %v, %v", released, err)
			}
			if n := len(billed(sim)); n != 1 {
				t.Fatalf("billed after release: %d, want the other team's 1", n)
			}
		})
	}
}
