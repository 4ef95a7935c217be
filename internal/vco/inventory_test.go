package vco_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

func TestListCustomerLocations(t *testing.T) {
	e := newEnv(t, vcosim.Options{})
	got, err := e.cluster.ListCustomerLocations(e.ctx)
	e.must(err)
	if !slices.Equal(got, []string{loc, loc2}) {
		t.Fatalf("customer locations = %v, want [%s %s]", got, loc, loc2)
	}
}

// TestReleaseUnattachedVGPU: the release gpucheck uses is refused by the platform once the
// reservation is attached, so a reservation attached after it was read is never detached.
func TestReleaseUnattachedVGPU(t *testing.T) {
	e := newEnv(t, vcosim.Options{})
	ctx, c := e.ctx, e.cluster
	cs := e.cloudspace("cs", loc)
	vm := e.vm(cs.ID, "gpu-0", loc)
	ids, err := e.sim.ReserveVGPUs(vcosim.SeedCustomer, loc, vcosim.SeedStubGPUProfile, "capvco_ns_c1_m_gpu_0", "capvco_ns_c1_m_gpu_1")
	e.must(err)
	e.must(c.AttachVGPU(ctx, cs.ID, vm.ID, ids[0]))

	if err := c.ReleaseUnattachedVGPU(ctx, loc, ids[0]); !errors.Is(err, vco.ErrConflict) {
		t.Fatalf("attached reservation: err = %v, want ErrConflict", err)
	}
	if !billed(e, "vgpu", ids[0]) {
		t.Fatal("the attached reservation was released")
	}
	e.must(c.ReleaseUnattachedVGPU(ctx, loc, ids[1]))
	if billed(e, "vgpu", ids[1]) {
		t.Fatal("the unattached reservation is still billed: the release was not permanent")
	}
}
