package controllers_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// writeCounter counts the controllers' writes to the Kubernetes API server.
type writeCounter struct {
	n    atomic.Int64
	rt   http.RoundTripper
	what atomic.Value
}

func (w *writeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		w.n.Add(1)
		w.what.Store(r.Method + " " + r.URL.Path)
	}
	return w.rt.RoundTrip(r)
}

// BenchmarkMachinesToProvisioned: N VCOMachines (default 100, CAPX_BENCH_MACHINES) of one
// provisioned cluster reconcile to provisioned against the simulator, with CAPI's own
// controllers; then every machine is reconciled again with nothing to do; then one resync
// wave (resyncWave). It reports the time to provisioned, whitesky.cloud calls per machine
// against the minimum, the steady state's mutating platform calls and Kubernetes writes, which
// must both be zero, and the calls of a resync wave.
//
//	go test ./internal/capvco/controllers/ -run '^$' -bench MachinesToProvisioned -benchtime 1x
//
// The API's minimum for one VM is one call (POST .../vms, which blocks until the VM is
// deployed). A create that survives unknown outcomes needs a lookup by name before it, so two
// calls is the floor for a safe create; the rest are reads that confirm the result.
func BenchmarkMachinesToProvisioned(b *testing.B) {
	n := 100
	if v, err := strconv.Atoi(os.Getenv("CAPX_BENCH_MACHINES")); err == nil && v > 0 {
		n = v
	}
	// CAPX_BENCH_TIMESCALE=1 gives the simulator the platform's own delays (a VM create blocks
	// about 2 s); by default they are a thousandth of that, so the Kubernetes side dominates.
	var simOpts vcosim.Options
	clientOpts := vco.Options{}
	if v, err := strconv.ParseFloat(os.Getenv("CAPX_BENCH_TIMESCALE"), 64); err == nil && v != 0 {
		simOpts.TimeScale, clientOpts.Timeout = v, time.Minute
		b.Logf("simulator time scale %g", v)
	}
	writes := &writeCounter{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { writes.rt = rt; return writes })
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h := newHarness(b, harnessOptions{config: cfg, machineConcurrency: 8, sim: simOpts, clientOp: clientOpts})
		g := NewWithT(b)
		_, vc := h.cluster("bench", nil)
		waitFor(h, vc, time.Minute, "provisioned", provisionedCluster)
		h.sim.ResetRequests()
		b.StartTimer()

		start := time.Now()
		machines := make([]*capvcov1.VCOMachine, n)
		for j := range machines {
			machines[j] = h.machine("bench", fmt.Sprintf("w-%03d", j), false, nil)
		}
		var list capvcov1.VCOMachineList
		waitMachines(b, "machines provisioned", n, scaledTimeout(n, 5*time.Minute), 200*time.Millisecond, n, func() int {
			_ = env.Client.List(context.Background(), &list, client.InNamespace(h.ns))
			done := 0
			for k := range list.Items {
				if provisionedMachine(&list.Items[k]) {
					done++
				}
			}
			return done
		})
		elapsed := time.Since(start)
		b.StopTimer()

		byRoute := map[string]int{}
		reqs := h.sim.Requests()
		for _, r := range reqs {
			byRoute[r.Method+" "+strings.TrimPrefix(r.Route, "/api/1")]++
		}
		b.ReportMetric(elapsed.Seconds(), "s/provision-all")
		b.ReportMetric(float64(len(reqs))/float64(n), "calls/machine")
		b.ReportMetric(1, "min-calls/machine")
		b.ReportMetric(2, "safe-min-calls/machine")
		b.ReportMetric(float64(byRoute["GET /customers/{customer_id}/cloudspaces/{cloudspace_id}/vms"])/float64(n), "vm-lists/machine")
		logRoutes(b, byRoute, n)

		// Settled: every machine's status describes its current generation (writing the
		// provider ID bumps it once, and the next reconcile records that), and the controllers
		// have stopped writing.
		waitMachines(b, "machines whose status describes their generation", n, scaledTimeout(n, 2*time.Minute), 200*time.Millisecond, n, func() int {
			_ = env.Client.List(context.Background(), &list, client.InNamespace(h.ns))
			current := 0
			for k := range list.Items {
				if list.Items[k].Status.ObservedGeneration == list.Items[k].Generation {
					current++
				}
			}
			return current
		})
		for last := writes.n.Load(); ; {
			time.Sleep(time.Second)
			if now := writes.n.Load(); now == last {
				break
			} else {
				last = now
			}
		}

		// Steady state: touching the VCOCluster re-queues every machine of the cluster.
		h.sim.ResetRequests()
		before := writes.n.Load()
		r0 := reconciles(b, "VCOMachine")
		g.Expect(h.get(vc)).To(Succeed())
		vc.Labels["bench/touch"] = strconv.Itoa(i)
		g.Expect(env.Client.Update(context.Background(), vc)).To(Succeed())
		waitMachines(b, "machines reconciled again", n, scaledTimeout(n, time.Minute), 100*time.Millisecond, n, func() int {
			return int(reconciles(b, "VCOMachine") - r0)
		})
		time.Sleep(time.Second) // a write would follow its reconcile's reads within this
		b.ReportMetric(float64(len(h.sim.Requests()))/float64(n), "steady-calls/machine")
		mut, what := h.mutating()
		kw := writes.n.Load() - before
		b.ReportMetric(float64(mut), "steady-mutating-calls")
		b.ReportMetric(float64(kw), "steady-k8s-writes")
		if mut != 0 || kw != 0 {
			b.Fatalf("steady state made %d mutating calls %v and %d Kubernetes writes (last %v)", mut, what, kw, writes.what.Load())
		}
		resyncWave(b, h, n)
		h.stop()
	}
}

// resyncWave measures the steady state over time: the manager restarts with a one-minute
// resync, and the platform calls of one resync window's end are counted (every machine's VM
// read falls due there, with the VCOCluster's own read when it is due). At the default resync
// (10 minutes) that wave comes once every 10 minutes, so it is reported per machine and, divided
// by 10, per machine per minute.
func resyncWave(b *testing.B, h *harness, n int) {
	const resync = time.Minute
	h.stop()
	h.opts.machineResync = resync
	h.start()
	boundary := time.Now().Truncate(resync).Add(resync)
	if time.Until(boundary) < 20*time.Second {
		boundary = boundary.Add(resync)
	}
	var list capvcov1.VCOMachineList
	readSince := func(t time.Time) int {
		_ = env.Client.List(context.Background(), &list, client.InNamespace(h.ns))
		k := 0
		for _, m := range list.Items {
			if m.Status.VM != nil && !m.Status.VM.CheckedAt.Time.Before(t) {
				k++
			}
		}
		return k
	}
	// The restart's own reads (the provisioning's window has ended) settle first.
	waitMachines(b, "machines read in the window before the measured one", n, scaledTimeout(n, time.Minute), 200*time.Millisecond, n, func() int {
		return readSince(boundary.Add(-resync))
	})
	time.Sleep(time.Until(boundary.Add(-time.Second)))
	h.sim.ResetRequests()
	start := time.Now()
	waitMachines(b, "machines read again at the window's end", n, scaledTimeout(n, time.Minute), 100*time.Millisecond, n, func() int {
		return readSince(boundary)
	})
	elapsed := time.Since(start)
	time.Sleep(2 * time.Second) // a call would follow its reconcile's reads within this
	byRoute := map[string]int{}
	reqs := h.sim.Requests()
	for _, r := range reqs {
		byRoute[r.Method+" "+strings.TrimPrefix(r.Route, "/api/1")]++
	}
	mut, what := h.mutating()
	b.ReportMetric(float64(len(reqs))/float64(n), "resync-wave-calls/machine")
	b.ReportMetric(float64(len(reqs))/float64(n)/10, "steady-calls/machine/min")
	b.ReportMetric(elapsed.Seconds(), "s/resync-wave")
	b.Logf("resync wave: %d calls in %s", len(reqs), elapsed.Round(time.Millisecond))
	logRoutes(b, byRoute, n)
	if mut != 0 {
		b.Fatalf("the resync wave made %d mutating calls: %v", mut, what)
	}
}

// scaledTimeout is a wait chosen for 100 machines, in proportion for more
// (CAPX_BENCH_MACHINES=1000 waits ten times as long).
func scaledTimeout(n int, per100 time.Duration) time.Duration {
	return per100 * time.Duration(max(n, 100)) / 100
}

// waitMachines polls measure until it reaches want; on timeout it fails with the figure it
// measured last, so a run that does not finish still says how far it got.
func waitMachines(b *testing.B, what string, n int, timeout, every time.Duration, want int, measure func() int) {
	b.Helper()
	start := time.Now()
	for {
		last := measure()
		if last >= want {
			return
		}
		if time.Since(start) > timeout {
			b.Fatalf("%s: %d of %d after %s (timeout %s for %d machines)", what, last, want, time.Since(start).Round(time.Second), timeout, n)
		}
		time.Sleep(every)
	}
}

// reconciles is controller-runtime's count of finished reconciles of a controller (every
// manager in the process shares the registry).
func reconciles(b *testing.B, controller string) float64 {
	families, err := metrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

func logRoutes(b *testing.B, byRoute map[string]int, n int) {
	b.Helper()
	keys := make([]string, 0, len(byRoute))
	for k := range byRoute {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "  %6.2f/machine  %s\n", float64(byRoute[k])/float64(n), k)
	}
	b.Logf("platform calls while provisioning %d machines:\n%s", n, sb.String())
}
