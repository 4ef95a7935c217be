package controllers_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/state"
)

// managerMemoryLimit is the manager Deployment's memory limit (config/manager); the fleet
// benchmarks hold it to managerMemoryTarget (issue 27).
const (
	managerMemoryLimit  = 512 << 20
	managerMemoryTarget = 200 << 20
)

// BenchmarkHostileStates measures the manager's peak memory with many TerraformMachines whose
// modules wrote the most hostile states the engine still accepts: outputs just under
// state.MaxOutputsBytes together and a resource attribute just under state.MaxValueBytes, a
// few tens of KiB of gzip each that decompress to about 17 MiB (issue 9: one such Secret made
// one decode allocate 188 MiB, and all of them were cached and decoded on every reconcile).
// The manager runs as a process of its own with its default flags (managerProcess), so the peak
// is its own high-water mark (VmHWM, reset before the hostile machines are created), without the
// test's fixtures and client.
//
//	go test ./internal/captf/controllers/ -run '^$' -bench HostileStates -benchtime 2x
//
// CAPX_BENCH_MACHINES sets the number of machines (default 500).
func BenchmarkHostileStates(b *testing.B) {
	g := NewWithT(b)
	ctx := context.Background()
	n := benchFleetSize()
	env.StartKubelet(b, moduleImages)
	m := startManagerProcess(b, &writeCounter{}, "--providers=captf")
	ns := env.NewNamespace(b)

	tc, base := benchTemplate(b, ns)
	hostile := hostileState(b, base.Data[contract.BackendStateKey])
	b.Logf("hostile state: %d KiB of gzip", len(hostile)>>10)

	m.resetPeak(b)
	start := time.Now()
	benchFleet(n, func(name string) { appliedMachine(b, base, ns, name, hostile) })
	waitFleet(b, "machines that read their state, backed it up and are Ready", n, fleetTimeout(n, 15*time.Minute), time.Second, n,
		func() int { return fleetReady(ns) })
	bringUp := time.Since(start)
	b.Logf("%d machines with hostile states Ready after %s; manager peak RSS so far %d MiB", n, bringUp.Round(time.Second), m.status(b, "VmHWM")>>20)

	reconciles := m.reconciles(b)
	round := 0
	for b.Loop() {
		round++
		patch := []byte(`{"metadata":{"labels":{"bench.capx.test/round":"` + strconv.Itoa(round) + `"}}}`)
		g.Expect(env.Client.Patch(ctx, tc, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
		m.waitReconciled(b, fmt.Sprintf("round %d: machines reconciled", round), n, reconciles+float64(round*n))
	}
	b.StopTimer()
	peak := m.status(b, "VmHWM")
	b.ReportMetric(float64(peak)/(1<<20), "peak-rss-MiB")
	b.ReportMetric(bringUp.Seconds(), "s/bring-up")
	b.Logf("%d machines with hostile states, %d rounds of reconciles: manager peak RSS %d MiB (target %d MiB, limit %d MiB)",
		n, round, peak>>20, managerMemoryTarget>>20, managerMemoryLimit>>20)
	if peak > managerMemoryTarget {
		b.Errorf("the manager's peak RSS %d MiB is over the %d MiB target (its limit is %d MiB)", peak>>20, managerMemoryTarget>>20, managerMemoryLimit>>20)
	}
}

// hostileState is the template's state with an extra output that brings the outputs to just
// under state.MaxOutputsBytes and a resource whose attribute is just under state.MaxValueBytes.
func hostileState(b *testing.B, gz []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		b.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(raw, &st); err != nil {
		b.Fatal(err)
	}
	outs := st["outputs"].(map[string]any)
	used, _ := json.Marshal(outs)
	outs["junk"] = map[string]any{"value": strings.Repeat("x", state.MaxOutputsBytes-len(used)-4096), "type": "string", "sensitive": true}
	st["resources"] = append(st["resources"].([]any), map[string]any{
		"mode": "managed", "type": "terraform_data", "name": "junk", "provider": `provider["terraform.io/builtin/terraform"]`,
		"instances": []any{map[string]any{"schema_version": 0, "attributes": map[string]any{
			"id": "junk", "input": strings.Repeat("y", state.MaxValueBytes-(64<<10)),
		}}},
	})
	raw, err = json.Marshal(st)
	if err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestCompression)
	_, _ = zw.Write(raw)
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	s := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tfstate-default-0123456789abcdef-m"},
		Data: map[string][]byte{contract.BackendStateKey: out.Bytes()}}
	if _, err := state.Decode([]corev1.Secret{s}, "0123456789abcdef-m"); err != nil {
		b.Fatalf("the hostile state must be one the engine accepts: %v", err)
	}
	return out.Bytes()
}
