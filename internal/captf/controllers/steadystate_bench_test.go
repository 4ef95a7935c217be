package controllers_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/inputs"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/outputs"
	"github.com/capx-io/capx/internal/captf/state"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/testenv/mgrtest"
)

// BenchmarkSteadyState measures the manager with many provisioned TerraformMachines and nothing
// to do: every reconcile must end without a single write to the API server, and the manager
// must stay small. Each iteration changes a label on the TerraformCluster (the test's write,
// not the manager's), which reconciles every TerraformMachine of its cluster once, and waits
// until all are done.
//
// The machines are real as far as the manager can tell, without 500 Jobs: one machine is
// applied by a real Job (real runner, real OpenTofu); the others get a copy of its state,
// rewritten for their own name and lineage, in the Secret the backend would have written, plus
// durable inputs rendered by the inputs package for their own Machine, so the engine finds
// them applied and up to date.
//
//	go test ./internal/captf/controllers/ -run '^$' -bench SteadyState -benchtime 5x
//
// CAPX_BENCH_MACHINES sets the number of machines (default 500).
func BenchmarkSteadyState(b *testing.B) {
	g := NewWithT(b)
	ctx := context.Background()
	n := benchFleetSize()
	env.StartKubelet(b, moduleImages)
	writes := &writeCounter{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = writes.wrap
	mgrtest.Start(b, &testenv.Env{Config: cfg}, "--providers=captf", "--drift-interval=0")
	ns := env.NewNamespace(b)

	// The real part: a cluster and one machine, applied by Jobs; then the copies.
	tc, base := benchTemplate(b, ns)
	start := time.Now()
	benchFleet(n, func(name string) { copyMachine(b, base, ns, name) })
	b.Logf("created %d machines from the template in %s", n-1, time.Since(start).Round(time.Millisecond))

	// Wait until every machine is Ready and the manager has stopped writing.
	waitFleet(b, "machines Ready", n, fleetTimeout(n, 10*time.Minute), time.Second, n, func() int { return fleetReady(ns) })
	bringUp := time.Since(start)
	b.Logf("all %d machines Ready after %s, %d manager writes", n, bringUp.Round(time.Millisecond), writes.count())
	g.Eventually(func() bool { before := writes.count(); time.Sleep(3 * time.Second); return writes.count() == before },
		2*time.Minute).Should(BeTrue(), "the manager stops writing once every machine is Ready")
	if got := jobsIn(b, ns); got != 2 {
		b.Fatalf("%d Jobs exist; only the cluster's and the template machine's apply should", got)
	}

	writes.reset()
	rssBefore := vmRSS(b)
	reconciles := reconcileTotal(b)
	round := 0
	began, cpuBefore := time.Now(), processCPU(b)
	for b.Loop() {
		// A change of the TerraformCluster brings back every machine of its cluster (they take
		// its exports): one write by the test, n reconciles by the manager.
		round++
		patch := []byte(`{"metadata":{"labels":{"bench.capx.test/round":"` + strconv.Itoa(round) + `"}}}`)
		g.Expect(env.Client.Patch(ctx, tc, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
		want := reconciles + float64(round*n)
		waitFleet(b, fmt.Sprintf("round %d: machines reconciled", round), n, fleetTimeout(n, 5*time.Minute), 20*time.Millisecond, n, func() int {
			if left := want - reconcileTotal(b); left > 0 || !queueIdle(b) {
				return n - int(max(left, 1))
			}
			return n
		})
	}
	elapsed, cpu := time.Since(began), processCPU(b)-cpuBefore
	b.StopTimer()
	done := reconcileTotal(b) - reconciles
	b.ReportMetric(done/elapsed.Seconds(), "reconciles/s")
	b.ReportMetric(float64(writes.count()), "writes")
	b.ReportMetric(float64(vmRSS(b))/(1<<20), "rss-MiB")
	reads, top := writes.liveReads()
	b.ReportMetric(float64(reads)/done, "live-reads/reconcile")
	b.ReportMetric(elapsed.Seconds()/float64(round), "s/round")
	b.ReportMetric(float64(cpu.Microseconds())/1000/done, "cpu-ms/reconcile")
	b.ReportMetric(bringUp.Seconds(), "s/bring-up")
	b.Logf("%d machines, %d rounds: %.0f reconciles in %s (%.2f ms CPU each); manager writes %d %v; live reads %d %v; RSS %d MiB before, %d MiB after",
		n, round, done, elapsed.Round(time.Millisecond), float64(cpu.Microseconds())/1000/done, writes.count(), writes.seen(), reads, top, rssBefore>>20, vmRSS(b)>>20)
	if writes.count() != 0 {
		b.Errorf("the manager wrote %d times in steady state: %v", writes.count(), writes.seen())
	}
}

// benchMachine creates a Machine of the cluster prod using the shared bootstrap Secret, and its
// TerraformMachine, paused if asked.
func benchMachine(b *testing.B, ns, name string, paused bool) *captfv1.TerraformMachine {
	m := testenv.Machine(ns, name, "prod", "TerraformMachine", name, "workers-bootstrap")
	create(b, m)
	tm := testenv.TerraformMachine(ns, name, "prod", machineImage)
	ownedBy(tm, m, "Machine")
	if paused {
		tm.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	}
	create(b, tm)
	return tm
}

// benchFleetSize is the number of machines of a fleet benchmark: CAPX_BENCH_MACHINES, default 500.
func benchFleetSize() int {
	if v, err := strconv.Atoi(os.Getenv("CAPX_BENCH_MACHINES")); err == nil && v > 0 {
		return v
	}
	return 500
}

// benchTemplate applies the cluster prod and its machine m-000 in ns by real Jobs, and returns
// the TerraformCluster and the machine's state Secret, the template of a fleet's copies.
func benchTemplate(b *testing.B, ns string) (*captfv1.TerraformCluster, *corev1.Secret) {
	cluster := testenv.Cluster(ns, "prod", "TerraformCluster", "prod")
	create(b, cluster)
	tc := testenv.TerraformCluster(ns, "prod", "prod", clusterImage)
	ownedBy(tc, cluster, "Cluster")
	create(b, tc)
	create(b, testenv.BootstrapSecret(ns, "workers-bootstrap", "prod", "#cloud-config\n"))
	template := benchMachine(b, ns, "m-000", false)
	mgrtest.WaitFor(b, env, template, 3*time.Minute, "provisioned", func(o *captfv1.TerraformMachine) bool {
		return provisioned(o.Status.Initialization)
	})
	base := &corev1.Secret{}
	key := client.ObjectKey{Namespace: ns, Name: contract.StateSecretName(contract.StateSuffix(ns, captfv1.KindMachine, "m-000"))}
	if err := env.Client.Get(context.Background(), key, base); err != nil {
		b.Fatal(err)
	}
	return tc, base
}

// benchFleet makes the machines m-001 to m-<n-1> with makeOne, eight at a time.
func benchFleet(n int, makeOne func(name string)) {
	names := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for name := range names {
				makeOne(name)
			}
		})
	}
	for i := 1; i < n; i++ {
		names <- fmt.Sprintf("m-%03d", i)
	}
	close(names)
	wg.Wait()
}

// fleetReady counts the TerraformMachines of ns that are Ready with their state backed up (-1
// when the list fails).
func fleetReady(ns string) int {
	list := &captfv1.TerraformMachineList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		return -1
	}
	ready := 0
	for i := range list.Items {
		if conditions.IsTrue(&list.Items[i], captfv1.ReadyCondition) && len(list.Items[i].Status.StateBackups) > 0 {
			ready++
		}
	}
	return ready
}

// copyMachine makes machine name look applied with the template's state rewritten for the
// machine (name, address, instance id, lineage).
func copyMachine(b *testing.B, base *corev1.Secret, ns, name string) {
	appliedMachine(b, base, ns, name, rewriteState(b, base.Data[contract.BackendStateKey], "m-000", name))
}

// appliedMachine makes machine name look applied: its Machine and TerraformMachine, its durable
// inputs as the engine renders them, marked applied, and stateData in the state Secret the
// backend would write (labels and type of base), adopted as the engine adopts an applied state.
// The TerraformMachine is paused until all that exists, or the manager would find no state and
// apply it.
func appliedMachine(b *testing.B, base *corev1.Secret, ns, name string, stateData []byte) {
	ctx := context.Background()
	tm := benchMachine(b, ns, name, true)
	owner, err := jobs.OwnerOf(tm, "prod")
	if err != nil {
		b.Fatal(err)
	}
	rendered := renderMachine(b, tm, owner)
	if _, err := inputs.Ensure(ctx, env.Client, owner, rendered); err != nil {
		b.Fatal(err)
	}
	if _, err := inputs.MarkApplied(ctx, env.Client, owner); err != nil {
		b.Fatal(err)
	}

	suffix := owner.StateSuffix()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: contract.StateSecretName(suffix),
		Labels:      maps.Clone(base.Labels),
		Annotations: map[string]string{captfv1.InputsHashAnnotation: rendered.Hash},
	}, Type: base.Type}
	maps.Copy(s.Labels, owner.MoveLabels())
	s.Labels[contract.BackendSuffixLabel] = suffix
	ref, err := state.OwnerReference(tm, env.Scheme)
	if err != nil {
		b.Fatal(err)
	}
	s.OwnerReferences = []metav1.OwnerReference{ref}
	s.Data = map[string][]byte{contract.BackendStateKey: stateData}
	create(b, s)
	unpause := []byte(`{"metadata":{"annotations":{"` + clusterv1.PausedAnnotation + `":null}}}`)
	if err := env.Client.Patch(ctx, tm, client.RawPatch("application/merge-patch+json", unpause)); err != nil {
		b.Fatal(err)
	}
}

// renderMachine renders a machine's inputs the way the engine does for a Machine of prod.
func renderMachine(b *testing.B, tm *captfv1.TerraformMachine, owner jobs.Owner) *inputs.Rendered {
	ctx := context.Background()
	vars, err := inputs.ResolveVariables(ctx, env.Client, tm.Namespace, contract.RoleMachine, tm.Spec.WorkspaceSpec)
	if err != nil {
		b.Fatal(err)
	}
	boot := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tm.Namespace, Name: "workers-bootstrap"}, boot); err != nil {
		b.Fatal(err)
	}
	// The engine renders the cluster's exports from its state (status lists only their keys).
	cluster, err := state.Read(ctx, env.Client, tm.Namespace, contract.StateSuffix(tm.Namespace, captfv1.KindCluster, "prod"))
	if err != nil {
		b.Fatal(err)
	}
	exports := outputs.Decode(contract.RoleCluster, cluster.Outputs, outputs.Options{EndpointFromUser: true}).Exports
	r, err := inputs.Render(inputs.Source{
		Owner: owner, Object: tm, Variables: vars,
		Machine: &inputs.MachineInputs{
			MachineName: tm.Name, BootstrapData: boot.Data["value"], BootstrapFormat: string(boot.Data["format"]),
		},
		ClusterOutputs: exports,
	})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// rewriteState is the template machine's state as the same module would have written it for
// another machine: its name, its name-derived address, a fresh instance id and lineage.
func rewriteState(b *testing.B, gz []byte, from, to string) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		b.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	s := strings.ReplaceAll(string(raw), `"`+from+`"`, `"`+to+`"`)
	s = strings.ReplaceAll(s, "capx-test:///"+from, "capx-test:///"+to)
	s = strings.ReplaceAll(s, machineIP(from), machineIP(to))
	s = freshIDs.ReplaceAllStringFunc(s, func(m string) string {
		return m[:strings.IndexByte(m, ':')] + `: "` + uuid.NewString() + `"`
	})
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	_, _ = zw.Write([]byte(s))
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	return out.Bytes()
}

// freshIDs are the state's lineage and the instance's id, which no two states share.
var freshIDs = regexp.MustCompile(`"(lineage|id)": "[^"]*"`)

// machineIP is the test machine module's address for a name: 10.0.1.<first byte of sha256(name)>.
func machineIP(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "10.0.1." + strconv.Itoa(int(sum[0]))
}

func jobsIn(b *testing.B, ns string) int {
	list := &batchv1.JobList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	return len(list.Items)
}

// reconcileTotal is controller-runtime's count of finished TerraformMachine reconciles.
func reconcileTotal(b *testing.B) float64 {
	return metricSum(b, "controller_runtime_reconcile_total", "controller", "TerraformMachine")
}

// queueIdle reports whether the TerraformMachine work queue is empty and no reconcile runs.
func queueIdle(b *testing.B) bool {
	return metricSum(b, "workqueue_depth", "name", "TerraformMachine") == 0 &&
		metricSum(b, "controller_runtime_active_workers", "controller", "TerraformMachine") == 0
}

func metricSum(b *testing.B, family, label, value string) float64 {
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
				return l.GetName() == label && l.GetValue() == value
			}) {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// vmRSS is this process's resident set size in bytes (the manager runs in it).
func vmRSS(b *testing.B) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// writeCounter counts the requests that are not reads (GET: get, list and watch) made
// through a rest.Config, and remembers which.
type writeCounter struct {
	n      atomic.Int64
	mu     sync.Mutex
	paths  map[string]int
	routes map[string]int // writes by method and route, names replaced by {name}
	reads  map[string]int // live reads (not watches) by route, names replaced by {name}
}

// readRoute is a read's route with the namespace and name replaced, and whether it selects by
// label: "list secrets ?labelSelector" is what a reconcile costs the API server per object.
func readRoute(req *http.Request) string {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	verb := "list"
	for i := 0; i < len(parts); i++ {
		if parts[i] == "namespaces" && i+1 < len(parts) {
			parts[i+1] = "{ns}"
			if i+3 < len(parts) {
				parts[i+3], verb = "{name}", "get"
			}
			break
		}
	}
	route := verb + " " + strings.Join(parts, "/")
	if req.URL.Query().Has("labelSelector") {
		route += " ?labelSelector"
	}
	return route
}

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead && req.Method != http.MethodOptions {
			w.n.Add(1)
			w.mu.Lock()
			if w.paths == nil {
				w.paths = map[string]int{}
			}
			w.paths[req.Method+" "+req.URL.Path]++
			if w.routes == nil {
				w.routes = map[string]int{}
			}
			w.routes[writeRoute(req)]++
			w.mu.Unlock()
		} else if req.Method == http.MethodGet && req.URL.Query().Get("watch") != "true" {
			w.mu.Lock()
			if w.reads == nil {
				w.reads = map[string]int{}
			}
			w.reads[readRoute(req)]++
			w.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

func (w *writeCounter) count() int64 { return w.n.Load() }

func (w *writeCounter) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n.Store(0)
	w.paths = nil
	w.routes = nil
	w.reads = nil
}

// writeRoute is a write's method and route with the namespace and name replaced, marked when it
// is a dry run (admission only: nothing is stored).
func writeRoute(req *http.Request) string {
	route := strings.TrimPrefix(readRoute(req), "list ")
	route = strings.TrimPrefix(route, "get ")
	route = strings.TrimSuffix(route, " ?labelSelector")
	if req.URL.Query().Has("dryRun") {
		route += " (dry run)"
	}
	return req.Method + " " + route
}

// byRoute is the writes since the last reset by route.
func (w *writeCounter) byRoute() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.routes)
}

// liveReads is the number of reads sent to the API server since the last reset, and the five
// most frequent routes.
func (w *writeCounter) liveReads() (int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	total := 0
	routes := make([]string, 0, len(w.reads))
	for r, n := range w.reads {
		total += n
		routes = append(routes, r)
	}
	slices.SortFunc(routes, func(a, b string) int { return w.reads[b] - w.reads[a] })
	out := make([]string, 0, 5)
	for _, r := range routes[:min(5, len(routes))] {
		out = append(out, fmt.Sprintf("%s ×%d", r, w.reads[r]))
	}
	return total, out
}

// seen lists up to 10 of the written paths with their counts.
func (w *writeCounter) seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for p, n := range w.paths {
		out = append(out, fmt.Sprintf("%s ×%d", p, n))
	}
	slices.Sort(out)
	if len(out) > 10 {
		out = append(out[:10], fmt.Sprintf("and %d more", len(out)-10))
	}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
