package gpucheck_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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

// BenchmarkScanUnderChurn is the field report's case at a tenth of its timings: every list
// call takes 30 ms and another team releases one reservation and reserves another every
// 10 ms, while 505 orphans are listed 50 a page. It measures what a scan costs then, and
// fails if a scan reports complete and misses an orphan. (TestScanCompleteUnderChurn drives
// the same churn deterministically.)
//
//	go test -run '^$' -bench ScanUnderChurn -benchtime 5x ./internal/gpucheck
func BenchmarkScanUnderChurn(b *testing.B) {
	const route = "GET /customers/{customer_id}/locations/{location}/vgpus"
	ctx := context.Background()
	f := gpuchecktest.Seed(b, false)
	names := make([]string, 0, 1010)
	for i := range 505 {
		names = append(names, fmt.Sprintf("team-b-%d", i), fmt.Sprintf("capvco_gone_c_m%d_gpu_0", i))
	}
	ids, err := f.Sim.ReserveVGPUs(vcosim.SeedCustomer, gpuchecktest.Loc2, vcosim.SeedStubGPUProfile, names...)
	if err != nil {
		b.Fatal(err)
	}
	var team, orphans []string
	for i, id := range ids {
		if i%2 == 0 {
			team = append(team, id)
		} else {
			orphans = append(orphans, id)
		}
	}
	f.Sim.Faults().Add(vcosim.Fault{Route: route, Latency: 30 * time.Millisecond})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // the other team
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if len(team) > 0 {
				_ = f.Client.ReleaseVGPU(ctx, gpuchecktest.Loc2, team[0])
				team = team[1:]
			}
			if got, err := f.Sim.ReserveVGPUs(vcosim.SeedCustomer, gpuchecktest.Loc2, vcosim.SeedStubGPUProfile, fmt.Sprintf("team-b-new-%d", n)); err == nil {
				team = append(team, got...)
			}
		}
	}()
	owners, _ := f.Cluster.Owners(ctx)
	incomplete := 0
	f.Sim.ResetRequests()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := (&gpucheck.Scanner{Platform: f.Client, Owners: owners, PageSize: 50}).Scan(ctx, []string{gpuchecktest.Loc2})
		if err != nil {
			incomplete++
			continue
		}
		got := map[string]bool{}
		for _, fd := range rep.Findings {
			got[fd.ID] = fd.Orphan
		}
		for _, id := range orphans {
			if !got[id] {
				b.Fatalf("scan %d reported complete and missed orphan %s", i, id)
			}
		}
	}
	b.StopTimer()
	close(stop)
	<-done
	pages := 0
	for _, r := range f.Sim.Requests() {
		if r.Method+" "+strings.TrimPrefix(r.Route, "/api/1") == route {
			pages++
		}
	}
	b.ReportMetric(float64(pages)/float64(b.N), "pages/scan")
	b.ReportMetric(float64(incomplete), "incomplete")
}
