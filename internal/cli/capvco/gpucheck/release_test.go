package gpucheck_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capx-io/capx/internal/cli/capvco/gpucheck"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	engine "github.com/capx-io/capx/internal/gpucheck"
	"github.com/capx-io/capx/internal/gpucheck/gpuchecktest"
	"github.com/capx-io/capx/internal/testenv/golden"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// answer is stdin that, when the question is read, first runs tricks (the account and the
// cluster change while the operator thinks), then answers.
type answer struct {
	tricks func()
	text   string
	done   bool
}

func (a *answer) Read(p []byte) (int, error) {
	if !a.done && a.tricks != nil {
		a.tricks()
	}
	if a.done {
		return 0, nil
	}
	a.done = true
	return copy(p, a.text), nil
}

func billedAll(f *gpuchecktest.Fixture) map[string]bool {
	out := map[string]bool{}
	for _, b := range f.Sim.Billed() {
		if b.Kind == "vgpu" {
			out[b.ID] = true
		}
	}
	return out
}

// TestReleaseOnATerminal: the question names every reservation; while it waits, a machine
// comes back, one orphan is renamed and another attached; only the untouched ones go, one
// line each.
func TestReleaseOnATerminal(t *testing.T) {
	f := gpuchecktest.Seed(t, false)
	ctx := context.Background()
	tricks := func() {
		undo, err := gpuchecktest.AddMachineTo(ctx, env.Client, "ns", "m9", "c1")
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(undo)
		if err := f.Sim.RenameVGPU(f.IDs["renamed-dashes"], "capvco-ns-c1-m3-gpu-0-keep"); err != nil {
			t.Error(err)
		}
		if err := f.Client.AttachVGPU(ctx, f.Cloudspace, f.VMs["jupyter"], f.IDs["renamed-upper"]); err != nil {
			t.Error(err)
		}
	}
	r := run(t, f, runOpts{kube: true, tty: true, stdin: &answer{tricks: tricks, text: "yes\n"}}, "release", "-location", gpuchecktest.Loc, "--include-renamed")
	wantCode(t, r, cmdutil.ExitFound) // the attached-foreign orphans and the skipped ones remain
	golden.Assert(t, filepath.Join("testdata", "release-tty.golden"), []byte(r.out))
	for _, c := range gpuchecktest.Cases {
		if (c.Releasable || c.Needs != "") && !strings.Contains(r.errOut, f.IDs[c.Label]) {
			t.Errorf("the question does not name %s (%s):\n%s", c.Label, f.IDs[c.Label], r.errOut)
		}
	}
	if !strings.Contains(r.errOut, "\r\033[Kreading the vGPU reservations of acme@") {
		t.Fatalf("no progress on the terminal:\n%q", r.errOut)
	}
	if !strings.Contains(r.errOut, "Release 10 reservations permanently? [y/N]") {
		t.Fatalf("no question:\n%s", r.errOut)
	}
	billed := billedAll(f)
	for _, c := range gpuchecktest.Cases {
		released := (c.Releasable || c.Needs != "") && c.Label != "orphan-machine-gone" && c.Label != "renamed-dashes" && c.Label != "renamed-upper"
		if billed[f.IDs[c.Label]] == released {
			t.Errorf("%s: billed %v, want released %v", c.Label, billed[f.IDs[c.Label]], released)
		}
	}
}

// TestReleaseRefusals: no terminal and no --yes, a "no", an incomplete listing: nothing is
// released.
func TestReleaseRefusals(t *testing.T) {
	f := gpuchecktest.Seed(t, true)
	before := len(billedAll(f))
	check := func(t *testing.T, r result, code cmdutil.ExitCode, msg string) {
		t.Helper()
		wantCode(t, r, code)
		if !strings.Contains(r.errOut, msg) {
			t.Fatalf("stderr lacks %q:\n%s", msg, r.errOut)
		}
		if n := len(billedAll(f)); n != before {
			t.Fatalf("%d reservations released", before-n)
		}
	}
	t.Run("no terminal", func(t *testing.T) {
		check(t, run(t, f, runOpts{kube: true}, "release", "--location", gpuchecktest.Loc), cmdutil.ExitUsage, "re-run with --yes")
	})
	t.Run("answered no", func(t *testing.T) {
		check(t, run(t, f, runOpts{kube: true, tty: true, stdin: &answer{text: "n\n"}}, "release", "--location", gpuchecktest.Loc), cmdutil.ExitCancelled, "nothing was changed")
	})
	t.Run("incomplete listing", func(t *testing.T) {
		f.Sim.Faults().Script("GET /customers/{customer_id}/locations/{location}/vgpus", vcosim.Fault{}, vcosim.Fault{Status: 500})
		check(t, run(t, f, runOpts{kube: true}, "release", "--yes", "--page-size", "300", "--api-retries", "1"), cmdutil.ExitFailure, "nothing was released")
	})
	t.Run("id not releasable", func(t *testing.T) {
		check(t, run(t, f, runOpts{kube: true}, "release", "--yes", "--location", gpuchecktest.Loc, "--id", f.IDs["attached-orphan"]), cmdutil.ExitUsage,
			"it is attached to VM m8-old")
	})
}

// TestReleaseScripted: --yes -o json releases what --id names and reports each result.
func TestReleaseScripted(t *testing.T) {
	f := gpuchecktest.Seed(t, false)
	id := f.IDs["orphan-cluster-gone"]
	r := run(t, f, runOpts{kube: true}, "release", "--location", gpuchecktest.Loc, "--id", id, "--yes", "-o", "json")
	wantCode(t, r, cmdutil.ExitOK) // what --id asked for is gone; other orphans do not count
	var got gpucheck.Release
	if err := json.Unmarshal([]byte(r.out), &got); err != nil {
		t.Fatalf("%v\n%s", err, r.out)
	}
	if got.Kind != "GPURelease" || len(got.Results) != 1 || got.Results[0].ID != id || got.Results[0].Outcome != engine.Released {
		t.Fatalf("results %+v", got.Results)
	}
	if f.Billed(id) {
		t.Fatal("still billed")
	}
}

// TestReleaseWithoutManagementCluster: names alone release nothing without an opt-in;
// --include-renamed releases the renamed ones (recycle bin included), --allow-unverified the
// unattached capvco_* ones.
func TestReleaseWithoutManagementCluster(t *testing.T) {
	f := gpuchecktest.Seed(t, false)
	before := len(billedAll(f))
	r := run(t, f, runOpts{}, "release", "--location", gpuchecktest.Loc, "--yes", "--ownership", "off")
	wantCode(t, r, cmdutil.ExitFound)
	if !strings.Contains(r.out, "Nothing to release.") || !strings.Contains(r.errOut, "pass --allow-unverified") ||
		!strings.Contains(r.errOut, "--include-renamed") || len(billedAll(f)) != before {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", r.out, r.errOut)
	}
	r = run(t, f, runOpts{}, "release", "--location", gpuchecktest.Loc, "--yes", "--ownership", "off", "--include-renamed")
	wantCode(t, r, cmdutil.ExitFound)
	if !strings.Contains(r.out, "Released 5, skipped 0, failed 0.") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", r.out, r.errOut)
	}
	r = run(t, f, runOpts{}, "-location", gpuchecktest.Loc, "release", "--yes", "--ownership=off", "--allow-unverified")
	wantCode(t, r, cmdutil.ExitOK)
	if !strings.Contains(r.out, "Released 8, skipped 0, failed 0.") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", r.out, r.errOut)
	}
	if !f.Billed(f.IDs["owned-attached"]) || !f.Billed(f.IDs["attached-foreign-vm"]) || !f.Billed(f.IDs["foreign"]) {
		t.Fatal("an attached or foreign reservation was released")
	}
}

// TestReleaseKeepsLooseNames: names that only start with "capvco" (kept on purpose, another
// team's, a bare prefix, the runbook's "-keep") are never released by a plain release, with
// or without a management cluster; --id releases the one it names, --include-renamed all.
func TestReleaseKeepsLooseNames(t *testing.T) {
	kept := []string{"capvco-keep-do-not-delete", "CapVcoTrainingReservedByTeamB", "capvco", "capvco_ns_c1_m9_gpu_0-keep"}
	f := gpuchecktest.SeedOne(t, gpuchecktest.Cases[0])
	ids, err := f.Sim.ReserveVGPUs(vcosim.SeedCustomer, gpuchecktest.Loc, vcosim.SeedStubGPUProfile, kept...)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []runOpts{{kube: true}, {}} {
		r := run(t, f, o, "release", "--location", gpuchecktest.Loc, "--yes")
		wantCode(t, r, cmdutil.ExitFound)
		for i, id := range ids {
			if !f.Billed(id) {
				t.Fatalf("kube=%v: %q was released without --id or --include-renamed\n%s", o.kube, kept[i], r.out)
			}
		}
		if !strings.Contains(r.errOut, "release it by --id (or all such with --include-renamed)") {
			t.Fatalf("kube=%v: stderr does not say how to release them:\n%s", o.kube, r.errOut)
		}
	}
	r := run(t, f, runOpts{kube: true}, "release", "--location", gpuchecktest.Loc, "--yes", "--id", ids[1])
	wantCode(t, r, cmdutil.ExitOK)
	if f.Billed(ids[1]) || !f.Billed(ids[0]) {
		t.Fatalf("--id released the wrong ones:\n%s", r.out)
	}
	r = run(t, f, runOpts{kube: true}, "release", "--location", gpuchecktest.Loc, "--yes", "--include-renamed")
	wantCode(t, r, cmdutil.ExitOK)
	if !strings.Contains(r.out, "Released 3, skipped 0, failed 0.") {
		t.Fatalf("--include-renamed:\n%s\n%s", r.out, r.errOut)
	}
}

// TestReleaseDryRun: --dry-run needs no terminal and no --yes, lists what a release would
// select, releases nothing, and exits as the check does.
func TestReleaseDryRun(t *testing.T) {
	f := gpuchecktest.Seed(t, false)
	before := len(billedAll(f))
	r := run(t, f, runOpts{kube: true}, "release", "--location", gpuchecktest.Loc, "--dry-run")
	wantCode(t, r, cmdutil.ExitFound)
	if !strings.Contains(r.out, "Dry run: 5 reservations would be released; nothing was released.") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", r.out, r.errOut)
	}
	for _, c := range gpuchecktest.Cases {
		if c.Releasable != strings.Contains(r.out, f.IDs[c.Label]+"  ") {
			t.Errorf("%s: listed %v, want %v", c.Label, !c.Releasable, c.Releasable)
		}
	}
	js := run(t, f, runOpts{kube: true}, "release", "--location", gpuchecktest.Loc, "--dry-run", "-o", "json")
	wantCode(t, js, cmdutil.ExitFound)
	var got gpucheck.Release
	if err := json.Unmarshal([]byte(js.out), &got); err != nil {
		t.Fatalf("%v\n%s", err, js.out)
	}
	if !got.DryRun || len(got.Results) != 5 {
		t.Fatalf("dryRun %v, %d results", got.DryRun, len(got.Results))
	}
	for _, res := range got.Results {
		if res.Outcome != engine.WouldRelease {
			t.Fatalf("%s: %s", res.ID, res.Outcome)
		}
	}
	if n := len(billedAll(f)); n != before {
		t.Fatalf("a dry run released %d reservations", before-n)
	}
}
