package vco_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// BenchmarkListAllVGPUs10k pages through 10,000 reservations, as capvco-gpucheck does for a
// busy location, at several page sizes (25 is the API's default).
func BenchmarkListAllVGPUs10k(b *testing.B) {
	e := newEnv(b, vcosim.Options{})
	names := make([]string, 10000)
	for i := range names {
		names[i] = fmt.Sprintf("capvco_ns_c%d_m%d_gpu_0", i/100, i%100)
	}
	if _, err := e.sim.ReserveVGPUs(vcosim.SeedCustomer, loc, vcosim.SeedStubGPUProfile, names...); err != nil {
		b.Fatal(err)
	}
	c := e.client(vcosim.SeedClusterPrinc, vco.Options{HTTPClient: benchHTTP()})
	for _, limit := range []int{25, 500, 0} {
		b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) {
			opts := vco.ListVGPUsOptions{Limit: limit}
			if limit == 0 {
				opts.Limit = 10000 // one page: limit=0 means "all" to the API, but ListAllVGPUs pages
			}
			for b.Loop() {
				all, err := c.ListAllVGPUs(e.ctx, loc, opts)
				if err != nil || len(all) != 10000 {
					b.Fatalf("%d reservations, err %v", len(all), err)
				}
			}
		})
	}
}

// BenchmarkConcurrentVMCreate200 creates 200 VMs at once against the simulator and checks
// that none is lost or duplicated.
func BenchmarkConcurrentVMCreate200(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		e := newEnv(b, vcosim.Options{})
		cs := e.cloudspace("bench", loc)
		img := e.image(loc)
		c := e.client(vcosim.SeedClusterPrinc, vco.Options{MaxConcurrent: 64, HTTPClient: benchHTTP()})
		b.StartTimer()
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for i := range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := c.CreateVM(e.ctx, cs.ID, vco.CreateVMRequest{Name: fmt.Sprintf("w-%03d", i), VCPUs: 1, MemoryMiB: 512, ImageID: img})
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		b.StopTimer()
		for err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		vms, err := c.ListVMs(e.ctx, cs.ID, false)
		if err != nil {
			b.Fatal(err)
		}
		seen := map[string]bool{}
		ids := map[int]bool{}
		for _, vm := range vms {
			if seen[vm.Name] || ids[vm.ID] {
				b.Fatalf("duplicate VM %s/%d", vm.Name, vm.ID)
			}
			seen[vm.Name], ids[vm.ID] = true, true
		}
		if len(vms) != 200 {
			b.Fatalf("%d VMs, want 200", len(vms))
		}
		b.StartTimer()
	}
}
