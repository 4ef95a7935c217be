package controllers_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// BenchmarkFleetDrift runs the manager as a user does: its own process (the manager binary),
// default flags, drift checks on, with n TerraformMachines of one cluster (the steady-state
// fixture: one machine applied by a real Job, the others copies of its state). It measures:
//
//   - bring-up: every machine Ready, and the manager's peak RSS meanwhile;
//   - a quiet round: every machine reconciled once while no drift check is due: the manager must
//     not write at all (0 writes outside drift checks and real changes);
//   - one full drift interval: from the round's end until every machine has a recorded drift
//     check, the Kubernetes writes, Jobs started and reconciles per minute, and the manager's
//     peak RSS and CPU. Every drift Job runs: the kubelet stand-in runs the real runner and
//     OpenTofu for it.
//
// The copies are created at one moment, so their checks spread over one interval that begins
// half an interval later (decide.DriftDue); the measured window is that interval.
//
// The drift interval is shortened to CAPX_BENCH_DRIFT_INTERVAL (default 10m) for both kinds (the
// defaults are 6 h for machines, 30 min for the cluster): the drift Jobs a minute measured are
// n/interval; at the defaults they are n/6 h, so the measured rate is (6 h / interval) times the
// default's, and the per-Job costs (writes, reconciles, CPU) carry over.
//
//	CAPX_BENCH_MACHINES=500 go test ./internal/captf/controllers/ -run '^$' -bench FleetDrift -benchtime 1x -timeout 2h
func BenchmarkFleetDrift(b *testing.B) {
	g := NewWithT(b)
	ctx := context.Background()
	n := benchFleetSize()
	interval := 10 * time.Minute
	if v := os.Getenv("CAPX_BENCH_DRIFT_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("CAPX_BENCH_DRIFT_INTERVAL=%q: want a positive duration", v)
		}
		interval = d
	}
	kubelet := env.StartKubelet(b, moduleImages)
	writes := &writeCounter{}
	m := startManagerProcess(b, writes, "--providers=captf",
		"--drift-interval="+interval.String(), "--machine-drift-interval="+interval.String())
	ns := env.NewNamespace(b)

	tc, base := benchTemplate(b, ns)
	start := time.Now()
	benchFleet(n, func(name string) { copyMachine(b, base, ns, name) })
	waitFleet(b, "machines Ready", n, fleetTimeout(n, 10*time.Minute), time.Second, n, func() int { return fleetReady(ns) })
	bringUp, bringUpWrites, bringUpPeak := time.Since(start), writes.count(), m.status(b, "VmHWM")
	b.Logf("%d machines Ready after %s, %d manager writes, manager peak RSS %d MiB", n, bringUp.Round(time.Second), bringUpWrites, bringUpPeak>>20)
	g.Eventually(func() bool { before := writes.count(); time.Sleep(3 * time.Second); return writes.count() == before },
		2*time.Minute).Should(BeTrue(), "the manager stops writing once every machine is Ready")

	// A round with nothing due: the copies were created after start, so none is due before
	// start+interval/2, and the two applied by Jobs not before their apply + interval/2.
	writes.reset()
	reconciles, cpu0, began := m.reconciles(b), m.cpu(b), time.Now()
	patch := []byte(`{"metadata":{"labels":{"bench.capx.test/round":"quiet"}}}`)
	g.Expect(env.Client.Patch(ctx, tc, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
	m.waitReconciled(b, "quiet round: machines reconciled", n, reconciles+float64(n))
	quiet, quietWrites, quietCPU := time.Since(began), writes.count(), m.cpu(b)-cpu0
	if time.Since(start) > interval/2 {
		b.Fatalf("the quiet round ended %s after the fleet's creation, past half the drift interval (%s): "+
			"drift checks may have been due; raise CAPX_BENCH_DRIFT_INTERVAL", time.Since(start).Round(time.Second), interval/2)
	}
	b.Logf("quiet round: %d reconciles in %s (%.0f/s, %.2f ms CPU each), manager writes %d %v",
		n, quiet.Round(time.Millisecond), float64(n)/quiet.Seconds(), float64(quietCPU.Microseconds())/1000/float64(n), quietWrites, writes.seen())
	if quietWrites != 0 {
		b.Errorf("the manager wrote %d times in a round with nothing due: %v", quietWrites, writes.seen())
	}

	// The copies' first checks fall between start+interval/2 and start+3*interval/2 (each at its
	// own phase): the interval measured begins at the first of them. Until then only the
	// cluster's and the template machine's checks can run (applied before start).
	if wait := time.Until(start.Add(interval / 2)); wait > 0 {
		time.Sleep(wait)
	}
	b.Logf("before the first copy's check: manager writes %d %v", writes.count(), writes.seen())
	// One full interval: every machine is checked once.
	writes.reset()
	m.resetPeak(b)
	reconciles, cpu0, began = m.reconciles(b), m.cpu(b), time.Now()
	pods0 := kubelet.Started()
	peakRSS, samples, sumRSS := int64(0), 0, int64(0)
	m.saveProfile(b, "allocs", "allocs-interval-start.pb.gz")
	waitFleet(b, "machines with a drift check", n, 2*interval+fleetTimeout(n, 10*time.Minute), 5*time.Second, n, func() int {
		rss := m.status(b, "VmRSS")
		if rss > peakRSS+4<<20 {
			// A new peak: what the heap holds now (CAPX_BENCH_PROFILE_DIR).
			m.saveProfile(b, "heap", "heap-peak.pb.gz")
		}
		peakRSS, samples, sumRSS = max(peakRSS, rss), samples+1, sumRSS+rss
		return fleetDriftChecked(ns, began)
	})
	elapsed, cpu := time.Since(began), m.cpu(b)-cpu0
	m.saveProfile(b, "allocs", "allocs-interval-end.pb.gz")
	m.saveProfile(b, "heap", "heap-interval-end.pb.gz")
	b.StopTimer()
	done, routes := m.reconciles(b)-reconciles, writes.byRoute()
	jobsStarted := routes["POST apis/batch/v1/namespaces/{ns}/jobs"]
	minutes := elapsed.Minutes()
	b.ReportMetric(bringUp.Seconds(), "s/bring-up")
	b.ReportMetric(float64(bringUpPeak)/(1<<20), "bring-up-peak-rss-MiB")
	b.ReportMetric(float64(quietWrites), "quiet-writes")
	b.ReportMetric(elapsed.Seconds(), "s/interval")
	b.ReportMetric(float64(writes.count())/minutes, "writes/min")
	b.ReportMetric(float64(jobsStarted)/minutes, "jobs/min")
	b.ReportMetric(done/elapsed.Seconds(), "reconciles/s")
	b.ReportMetric(float64(writes.count())/float64(max(jobsStarted, 1)), "writes/job")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(max(jobsStarted, 1)), "cpu-ms/job")
	b.ReportMetric(float64(m.status(b, "VmHWM"))/(1<<20), "peak-rss-MiB")
	b.Logf("%d machines, drift interval %s: every machine checked after %s (%.1f of the interval); %d drift Jobs started (%d Pods run), "+
		"%d writes (%.0f/min, %.1f a Job), %.0f reconciles (%.1f/s), manager CPU %s (%.0f ms a Job); "+
		"manager RSS peak %d MiB (VmHWM), mean %d MiB; bring-up peak %d MiB",
		n, interval, elapsed.Round(time.Second), elapsed.Seconds()/interval.Seconds(), jobsStarted, kubelet.Started()-pods0,
		writes.count(), float64(writes.count())/minutes, float64(writes.count())/float64(max(jobsStarted, 1)), done, done/elapsed.Seconds(),
		cpu.Round(time.Millisecond), float64(cpu.Milliseconds())/float64(max(jobsStarted, 1)),
		m.status(b, "VmHWM")>>20, sumRSS/int64(max(samples, 1))>>20, bringUpPeak>>20)
	b.Logf("writes by route: %s", formatRoutes(routes))
}

// fleetDriftChecked counts the TerraformMachines of ns whose newest drift check finished after
// since (-1 when the list fails).
func fleetDriftChecked(ns string, since time.Time) int {
	list := &captfv1.TerraformMachineList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		return -1
	}
	checked := 0
	for i := range list.Items {
		if c := list.Items[i].Status.LastDriftCheck; c != nil && !c.Time.Before(since.Truncate(time.Second)) {
			checked++
		}
	}
	return checked
}

// formatRoutes lists routes by count, most first.
func formatRoutes(routes map[string]int) string {
	keys := make([]string, 0, len(routes))
	for k := range routes {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return routes[b] - routes[a] })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+" ×"+strconv.Itoa(routes[k]))
	}
	return strings.Join(parts, "; ")
}
