package gpucheck_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/capx-io/capx/internal/gpucheck"
	"github.com/capx-io/capx/internal/gpucheck/gpuchecktest"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// benchReservations is the size the performance target names.
const benchReservations = 10000

// seedBench adds 10,000 reservations to the fixture's first location: every tenth one owned by
// the live machine ns/m1 in name, the rest orphans of a cluster that is gone.
func seedBench(b *testing.B, f *gpuchecktest.Fixture) {
	names := make([]string, 0, benchReservations)
	for i := range benchReservations {
		if i%10 == 0 {
			names = append(names, fmt.Sprintf("capvco_ns_c1_m1_gpu_%d", i%64))
		} else {
			names = append(names, fmt.Sprintf("capvco_bench_gone_m%d_gpu_0", i))
		}
	}
	if _, err := f.Sim.ReserveVGPUs(vcosim.SeedCustomer, gpuchecktest.Loc2, vcosim.SeedStubGPUProfile, names...); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWholeProcess10k runs the capvco-gpucheck binary, as an operator would, against a
// simulator holding 10,000 reservations (plus the fixture's 22) and a real management cluster:
// process start, credentials, the management cluster's VCOMachines, 20 pages of 500, the
// classification and the JSON output. The target is under 2 s per run.
//
//	go test -run '^$' -bench WholeProcess10k -benchtime 5x ./internal/cli/capvco/gpucheck
func BenchmarkWholeProcess10k(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "capvco-gpucheck")
	build := exec.Command("go", "build", "-o", bin, "github.com/capx-io/capx/cmd/capvco-gpucheck")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	f := gpuchecktest.Seed(b, false)
	seedBench(b, f)
	if err := f.ApplyTo(context.Background(), env.Client); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var worst time.Duration
	for b.Loop() {
		start := time.Now()
		cmd := exec.Command(bin, "-location", gpuchecktest.Loc2, "-orphans", "-o", "json", "--ownership", "required", "--kubeconfig", env.KubeconfigPath)
		cmd.Env = append(os.Environ(), "VCO_URL="+f.Creds.URL, "VCO_CUSTOMER="+f.Creds.Customer, "VCO_JWT="+f.Creds.JWT)
		var out bytes.Buffer
		cmd.Stdout = &out
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			b.Fatalf("exit: %v (want 1: orphans found)\n%s", err, out.Bytes()[:min(out.Len(), 2000)])
		}
		worst = max(worst, time.Since(start))
		if !bytes.Contains(out.Bytes(), []byte(`"reservations": 10000`)) || !bytes.Contains(out.Bytes(), []byte(`"orphans": 9000`)) {
			b.Fatalf("unexpected summary:\n%s", out.Bytes()[max(0, out.Len()-400):])
		}
	}
	b.ReportMetric(worst.Seconds(), "worst-s")
}

// BenchmarkScanClassify10k is the engine alone, in process, on the same data.
func BenchmarkScanClassify10k(b *testing.B) {
	f := gpuchecktest.Seed(b, false)
	seedBench(b, f)
	owners, err := f.Cluster.Owners(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	s := &gpucheck.Scanner{Platform: f.Client, Owners: owners}
	for b.Loop() {
		rep, err := s.Scan(context.Background(), []string{gpuchecktest.Loc2})
		if err != nil || rep.Summary.Reservations != benchReservations || rep.Summary.Orphans != 9000 {
			b.Fatalf("%v %+v", err, rep.Summary)
		}
	}
}
