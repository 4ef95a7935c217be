package gpucheck_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/capx-io/capx/internal/gpucheck"
	"github.com/capx-io/capx/internal/gpucheck/gpuchecktest"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// BenchmarkRelease1000Of10000 releases 1,000 orphans among 10,000 reservations, each after its
// owner check and re-read: the re-read looks where the listing found the reservation first,
// so a release costs a small page rather than a pass over the location.
//
//	go test -run '^$' -bench Release1000 -benchtime 3x ./internal/gpucheck
func BenchmarkRelease1000Of10000(b *testing.B) {
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		f := gpuchecktest.Seed(b, false)
		names := make([]string, 10000)
		for j := range names {
			names[j] = fmt.Sprintf("team-gpu-%d", j)
			if j%10 == 0 {
				names[j] = fmt.Sprintf("capvco_bench_gone_m%d_gpu_0", j)
			}
		}
		if _, err := f.Sim.ReserveVGPUs(vcosim.SeedCustomer, gpuchecktest.Loc2, vcosim.SeedStubGPUProfile, names...); err != nil {
			b.Fatal(err)
		}
		owners, _ := f.Cluster.Owners(ctx)
		rep, err := (&gpucheck.Scanner{Platform: f.Client, Owners: owners}).Scan(ctx, []string{gpuchecktest.Loc2})
		if err != nil {
			b.Fatal(err)
		}
		var sel []gpucheck.Finding
		for _, fd := range rep.Findings {
			if gpucheck.Selectable(fd, gpucheck.OptIns{}) {
				sel = append(sel, fd)
			}
		}
		f.Sim.ResetRequests()
		b.StartTimer()
		results := (&gpucheck.Releaser{Platform: f.Client, Cluster: f.Cluster}).Release(ctx, sel)
		b.StopTimer()
		for _, r := range results {
			if r.Outcome != gpucheck.Released {
				b.Fatalf("%s: %s %s", r.Name, r.Outcome, r.Detail)
			}
		}
		if len(results) != 1000 {
			b.Fatalf("%d released", len(results))
		}
		b.ReportMetric(float64(len(f.Sim.Requests()))/1000, "calls/release")
	}
}
