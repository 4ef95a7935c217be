package gpucheck_test

import (
	"context"
	"strings"
	"testing"

	"github.com/capx-io/capx/internal/gpucheck"
	"github.com/capx-io/capx/internal/gpucheck/gpuchecktest"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

func selectable(rep *gpucheck.Report, o gpucheck.OptIns) []gpucheck.Finding {
	var out []gpucheck.Finding
	for _, f := range rep.Findings {
		if gpucheck.Selectable(f, o) {
			out = append(out, f)
		}
	}
	return out
}

// attachOnReread attaches one reservation right after the release re-read it: the last
// instant before the release, which only the platform itself can catch.
type attachOnReread struct {
	gpucheck.Platform
	f      *gpuchecktest.Fixture
	id     string
	armed  bool
	client *vco.Client
}

func (p *attachOnReread) ListVGPUs(ctx context.Context, location string, opts vco.ListVGPUsOptions) (vco.VGPUPage, error) {
	page, err := p.Platform.ListVGPUs(ctx, location, opts)
	if p.armed {
		for _, v := range page.Items {
			if v.ID == p.id {
				p.armed = false
				if err := p.client.AttachVGPU(ctx, p.f.Cloudspace, p.f.VMs["jupyter"], p.id); err != nil {
					panic(err)
				}
			}
		}
	}
	return page, err
}

// TestReleaseCannotBeTricked lists, then changes the account and the management cluster in
// every way that must stop a release, then releases what the listing selected.
func TestReleaseCannotBeTricked(t *testing.T) {
	f := gpuchecktest.Seed(t, false)
	ctx := context.Background()
	rep, err := scan(t, f, true, gpuchecktest.Loc)
	if err != nil {
		t.Fatal(err)
	}
	sel := selectable(rep, gpucheck.OptIns{Renamed: true})
	selected := map[string]bool{}
	for _, s := range sel {
		selected[s.ID] = true
	}
	for _, c := range gpuchecktest.Cases {
		if want := c.Releasable || c.Needs == gpucheck.OptInRenamed; selected[f.IDs[c.Label]] != want {
			t.Fatalf("%s: selected %v, want %v", c.Label, selected[f.IDs[c.Label]], want)
		}
	}

	// Between list and release:
	// the machine of orphan-machine-gone comes back;
	f.Cluster.AddMachine(gpucheck.Machine{Namespace: "ns", Name: "m9", Cluster: "c1"})
	// renamed-dashes is renamed (to a name that still looks like an orphan);
	if err := f.Sim.RenameVGPU(f.IDs["renamed-dashes"], "capvco-ns-c1-m3-gpu-0-keep"); err != nil {
		t.Fatal(err)
	}
	// renamed-upper is attached to a VM;
	if err := f.Client.AttachVGPU(ctx, f.Cloudspace, f.VMs["jupyter"], f.IDs["renamed-upper"]); err != nil {
		t.Fatal(err)
	}
	// recycle-bin-renamed is released by someone else; orphan-same-machine-name-other-cluster
	// is attached in the instant between its re-read and its release.
	if err := f.Client.ReleaseVGPU(ctx, gpuchecktest.Loc, f.IDs["recycle-bin-renamed"]); err != nil {
		t.Fatal(err)
	}
	p := &attachOnReread{Platform: f.Client, f: f, id: f.IDs["orphan-same-machine-name-other-cluster"], armed: true, client: f.Client}

	results := (&gpucheck.Releaser{Platform: p, Cluster: f.Cluster, PageSize: 7}).Release(ctx, sel)
	if len(results) != len(sel) {
		t.Fatalf("%d results for %d selected", len(results), len(sel))
	}
	want := map[string]struct {
		outcome gpucheck.Outcome
		detail  string
	}{
		"orphan-machine-gone":                    {gpucheck.Skipped, "VCOMachine ns/m9 exists again"},
		"renamed-dashes":                         {gpucheck.Skipped, `renamed "capvco-ns-c1-m3-gpu-0" -> "capvco-ns-c1-m3-gpu-0-keep"`},
		"renamed-upper":                          {gpucheck.Skipped, "attached to VM jupyter"},
		"recycle-bin-renamed":                    {gpucheck.Skipped, "gone since it was listed"},
		"orphan-same-machine-name-other-cluster": {gpucheck.Skipped, "the platform refused: attached since it was re-read"},
		"orphan-cluster-gone":                    {gpucheck.Released, ""},
		"renamed-leading-zero":                   {gpucheck.Released, ""},
		"renamed-trailing-space":                 {gpucheck.Released, ""},
		"recycle-bin":                            {gpucheck.Released, ""},
		"recycle-bin-of-live-machine":            {gpucheck.Released, ""},
	}
	labels := map[string]string{}
	for l, id := range f.IDs {
		labels[id] = l
	}
	for _, r := range results {
		label := labels[r.ID]
		w, ok := want[label]
		if !ok {
			t.Errorf("%s was selected for release", label)
			continue
		}
		if r.Outcome != w.outcome || !strings.Contains(r.Detail, w.detail) {
			t.Errorf("%s: %s %q, want %s %q", label, r.Outcome, r.Detail, w.outcome, w.detail)
		}
		if billed := f.Billed(r.ID); billed == (r.Outcome == gpucheck.Released) && label != "recycle-bin-renamed" {
			t.Errorf("%s: outcome %s but billed=%v", label, r.Outcome, billed)
		}
	}
	// Nothing that was not selected was touched.
	for _, c := range gpuchecktest.Cases {
		if _, released := want[c.Label]; !released && !f.Billed(f.IDs[c.Label]) {
			t.Errorf("%s was released", c.Label)
		}
	}
}

// TestReleaseUnverified: without a management cluster nothing is selected without an opt-in;
// parsed names are released only when the caller allows unverified releases, and then
// without an owner check.
func TestReleaseUnverified(t *testing.T) {
	f := gpuchecktest.Seed(t, false)
	rep, err := scan(t, f, false, gpuchecktest.Loc)
	if err != nil {
		t.Fatal(err)
	}
	if sel := selectable(rep, gpucheck.OptIns{}); len(sel) > 0 {
		t.Fatalf("%s selectable without an opt-in and without a management cluster", sel[0].Name)
	}
	for _, s := range selectable(rep, gpucheck.OptIns{Renamed: true}) {
		if s.Class == gpucheck.Unverified {
			t.Fatalf("%s selectable without allowing unverified releases", s.Name)
		}
	}
	sel := selectable(rep, gpucheck.OptIns{Renamed: true, Unverified: true})
	results := (&gpucheck.Releaser{Platform: f.Client}).Release(context.Background(), sel)
	released := 0
	for _, r := range results {
		if r.Outcome != gpucheck.Released {
			t.Errorf("%s: %s %s", r.Name, r.Outcome, r.Detail)
		}
		released++
	}
	// Unattached parsed (owned ones included: nobody could tell) plus renamed and recycle bin.
	if released != 13 {
		t.Fatalf("released %d, want 13", released)
	}
	if !f.Billed(f.IDs["owned-attached"]) || !f.Billed(f.IDs["attached-foreign-vm"]) {
		t.Fatal("an attached reservation was released")
	}
}

// kept are reservations whose names start with "capvco" but are not CAPVCO's own scheme: a
// reservation kept on purpose (the runbook's "-keep"), another team's, a bare prefix.
var kept = []string{"capvco-keep-do-not-delete", "CapVcoTrainingReservedByTeamB", "capvco", "capvco_ns_c1_m9_gpu_0-keep"}

// TestReleaseNeedsOptInForLooseNames: with the management cluster, a release with no opt-in
// selects none of them; --include-renamed (or an --id) does.
func TestReleaseNeedsOptInForLooseNames(t *testing.T) {
	f := gpuchecktest.SeedOne(t, gpuchecktest.Cases[0])
	ids, err := f.Sim.ReserveVGPUs(vcosim.SeedCustomer, gpuchecktest.Loc, vcosim.SeedStubGPUProfile, kept...)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := scan(t, f, true, gpuchecktest.Loc)
	if err != nil {
		t.Fatal(err)
	}
	if sel := selectable(rep, gpucheck.OptIns{}); len(sel) > 0 {
		t.Fatalf("selected with no opt-in: %q", sel[0].Name)
	}
	if sel := selectable(rep, gpucheck.OptIns{Renamed: true}); len(sel) != len(kept) {
		t.Fatalf("--include-renamed selects %d of %d", len(sel), len(kept))
	}
	got := byID(rep)
	for _, id := range ids {
		if fd := got[id]; fd.Releasable || fd.ReleaseNeeds != gpucheck.OptInRenamed {
			t.Errorf("%q: releasable %v, needs %q", fd.Name, fd.Releasable, fd.ReleaseNeeds)
		}
	}
	if rep.Summary.Releasable != 0 || rep.Summary.ReleasableWith[gpucheck.OptInRenamed] != len(kept) {
		t.Fatalf("summary %+v", rep.Summary)
	}
}
