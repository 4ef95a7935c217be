package gpucheck_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capx-io/capx/internal/gpucheck"
	"github.com/capx-io/capx/internal/gpucheck/gpuchecktest"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

func scan(t *testing.T, f *gpuchecktest.Fixture, withCluster bool, locations ...string) (*gpucheck.Report, error) {
	t.Helper()
	s := &gpucheck.Scanner{Platform: f.Client, PageSize: 100}
	if withCluster {
		owners, err := f.Cluster.Owners(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		s.Owners = owners
	}
	return s.Scan(context.Background(), locations)
}

func byID(rep *gpucheck.Report) map[string]gpucheck.Finding {
	out := map[string]gpucheck.Finding{}
	for _, f := range rep.Findings {
		out[f.ID] = f
	}
	return out
}

// TestScanClassifies: every hand-made case gets its class, with and without the management
// cluster, and Loc2's 1,250 reservations are all read through 13 pages.
func TestScanClassifies(t *testing.T) {
	f := gpuchecktest.Seed(t, true)
	for _, withCluster := range []bool{true, false} {
		t.Run(fmt.Sprintf("cluster=%v", withCluster), func(t *testing.T) {
			rep, err := scan(t, f, withCluster)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Complete || len(rep.Locations) != 2 || rep.OwnershipChecked != withCluster {
				t.Fatalf("locations %+v, ownership checked %v", rep.Locations, rep.OwnershipChecked)
			}
			got := byID(rep)
			wantOrphans := 0
			for _, c := range gpuchecktest.Cases {
				fd, ok := got[f.IDs[c.Label]]
				want := c.Want
				if !withCluster {
					want = c.WantUnverified
				}
				if !ok || fd.Class != want {
					t.Errorf("%s (%q): class %q (%s), want %q", c.Label, c.Name, fd.Class, fd.Reason, want)
					continue
				}
				if withCluster && (fd.Releasable != c.Releasable || fd.ReleaseNeeds != c.Needs) {
					t.Errorf("%s: releasable %v needs %q, want %v %q", c.Label, fd.Releasable, fd.ReleaseNeeds, c.Releasable, c.Needs)
				}
				if fd.Releasable && fd.Attached() {
					t.Errorf("%s: an attached reservation is releasable", c.Label)
				}
				if fd.Orphan {
					wantOrphans++
				}
				if (fd.Class == gpucheck.RecycleBin) != (fd.BilledInRecycleBin != nil) {
					t.Errorf("%s: billed duration %v for class %s", c.Label, fd.BilledInRecycleBin, fd.Class)
				}
			}
			for _, id := range f.BulkOrphanIDs {
				want := gpucheck.Orphaned
				if !withCluster {
					want = gpucheck.Unverified
				}
				if fd := got[id]; fd.Class != want || !fd.Orphan || fd.Location != gpuchecktest.Loc2 {
					t.Fatalf("bulk orphan %s: %+v", id, fd)
				}
			}
			wantOrphans += gpuchecktest.BulkOrphans
			total := len(gpuchecktest.Cases) + gpuchecktest.BulkOrphans + gpuchecktest.BulkForeign
			if rep.Summary.Reservations != total || rep.Summary.Orphans != wantOrphans || len(rep.Orphans()) != wantOrphans {
				t.Fatalf("summary %+v, want %d reservations and %d orphans", rep.Summary, total, wantOrphans)
			}
			for _, l := range rep.Locations {
				if l.Location == gpuchecktest.Loc2 && l.Reservations != gpuchecktest.BulkOrphans+gpuchecktest.BulkForeign {
					t.Fatalf("%s read %d reservations", l.Location, l.Reservations)
				}
			}
		})
	}
}

// TestScanExactReasons pins the reasons an operator reads.
func TestScanExactReasons(t *testing.T) {
	f := gpuchecktest.Seed(t, false)
	rep, err := scan(t, f, true, gpuchecktest.Loc)
	if err != nil {
		t.Fatal(err)
	}
	got := byID(rep)
	for label, want := range map[string]string{
		"orphan-machine-gone":    "VCOMachine ns/m9 no longer exists",
		"orphan-cluster-gone":    "cluster old/gone no longer exists",
		"attached-orphan":        "attached to VM m8-old (",
		"attached-foreign-vm":    "but VCOMachine ns/m1 runs VM",
		"owned-machine-deleting": "being deleted",
		"recycle-bin":            "in the recycle bin and still billed",
	} {
		if r := got[f.IDs[label]].Reason; !strings.Contains(r, want) {
			t.Errorf("%s: reason %q lacks %q", label, r, want)
		}
	}
}

// flaky wraps the platform to change the account while it is being listed.
type flaky struct {
	gpucheck.Platform
	onPage func(n int)
	n      int
}

func (p *flaky) ListVGPUs(ctx context.Context, location string, opts vco.ListVGPUsOptions) (vco.VGPUPage, error) {
	p.n++
	if p.onPage != nil {
		p.onPage(p.n)
	}
	return p.Platform.ListVGPUs(ctx, location, opts)
}

// reversed answers every page after the first in reverse order, as a server whose order is
// not stable would: offset paging then proves nothing.
type reversed struct{ gpucheck.Platform }

func (p reversed) ListVGPUs(ctx context.Context, location string, opts vco.ListVGPUsOptions) (vco.VGPUPage, error) {
	page, err := p.Platform.ListVGPUs(ctx, location, opts)
	if opts.StartAfter > 0 {
		slices.Reverse(page.Items)
	}
	return page, err
}

// TestScanNeverConcludesFromAnIncompleteList: every way a listing can fail leaves the
// location incomplete and the scan in error, whatever was read before.
func TestScanNeverConcludesFromAnIncompleteList(t *testing.T) {
	const route = "GET /customers/{customer_id}/locations/{location}/vgpus"
	cases := []struct {
		name    string
		faults  func(f *gpuchecktest.Fixture)
		wrap    func(f *gpuchecktest.Fixture, p gpucheck.Platform) gpucheck.Platform
		want    error
		text    string
		timeout bool
	}{
		{name: "403", want: vco.ErrForbidden, text: "403 Forbidden",
			faults: func(f *gpuchecktest.Fixture) {
				f.Sim.Faults().Add(vcosim.Fault{Route: route, Status: 403, Message: "Forbidden: no read grant"})
			}},
		{name: "500 on the third page", want: vco.ErrServer, text: "stopped after 184 of 1250", // pages overlap by 16
			faults: func(f *gpuchecktest.Fixture) {
				f.Sim.Faults().Script(route, vcosim.Fault{}, vcosim.Fault{}, vcosim.Fault{Status: 500})
			}},
		{name: "503 until retries run out", want: vco.ErrUnavailable, text: "503",
			faults: func(f *gpuchecktest.Fixture) { f.Sim.Faults().Add(vcosim.Fault{Route: route, Status: 503}) }},
		{name: "timeout mid-listing", want: vco.ErrUnavailable, text: "stopped after 100 of 1250", timeout: true,
			faults: func(f *gpuchecktest.Fixture) {
				f.Sim.Faults().Script(route, vcosim.Fault{}, vcosim.Fault{Timeout: true, Hang: 10 * time.Second})
			}},
		{name: "the list's order changes", want: gpucheck.ErrListChanged, text: "came back in another order",
			wrap: func(f *gpuchecktest.Fixture, p gpucheck.Platform) gpucheck.Platform { return reversed{p} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := gpuchecktest.Seed(t, true)
			opts := gpuchecktest.ClientOptions()
			if tc.timeout {
				// Long enough for a loaded CI machine to serve the good pages, short
				// enough to give up on the held one soon.
				opts.Timeout, opts.MaxAttempts = time.Second, 1
			}
			c, err := vco.New(f.Creds, opts)
			if err != nil {
				t.Fatal(err)
			}
			var p gpucheck.Platform = c
			if tc.wrap != nil {
				p = tc.wrap(f, p)
			}
			if tc.faults != nil {
				tc.faults(f)
			}
			owners, _ := f.Cluster.Owners(context.Background())
			rep, err := (&gpucheck.Scanner{Platform: p, Owners: owners, PageSize: 100}).Scan(context.Background(), []string{gpuchecktest.Loc2})
			var inc *gpucheck.IncompleteError
			if !errors.As(err, &inc) || !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("err = %v, want an IncompleteError wrapping %v saying %q", err, tc.want, tc.text)
			}
			if rep.Complete || rep.Locations[0].Error == "" {
				t.Fatalf("the report claims a complete listing: %+v", rep.Locations)
			}
		})
	}
}

// TestScanReadsAListThatChangedOnce: a reservation made during the listing is read with the
// rest, and the listing is complete.
func TestScanReadsAListThatChangedOnce(t *testing.T) {
	f := gpuchecktest.Seed(t, true)
	p := &flaky{Platform: f.Client}
	p.onPage = func(n int) {
		if n == 3 {
			_, _ = f.Sim.ReserveVGPUs(vcosim.SeedCustomer, gpuchecktest.Loc2, vcosim.SeedStubGPUProfile, "capvco_late_c_m_gpu_0")
		}
	}
	rep, err := (&gpucheck.Scanner{Platform: p, PageSize: 100}).Scan(context.Background(), []string{gpuchecktest.Loc2})
	if err != nil {
		t.Fatal(err)
	}
	if want := gpuchecktest.BulkOrphans + gpuchecktest.BulkForeign + 1; rep.Summary.Reservations != want {
		t.Fatalf("read %d reservations, want %d", rep.Summary.Reservations, want)
	}
}

func TestScanLocationsFail(t *testing.T) {
	f := gpuchecktest.Seed(t, false)
	f.Sim.Faults().Add(vcosim.Fault{Route: "GET /customers/{customer_id}/locations", Status: 500})
	rep, err := (&gpucheck.Scanner{Platform: f.Client}).Scan(context.Background(), nil)
	if !errors.Is(err, vco.ErrServer) || !strings.Contains(err.Error(), "listing the customer's locations") || rep.Complete {
		t.Fatalf("err %v, locations %+v", err, rep.Locations)
	}
}

// capped answers at most 40 reservations a page whatever the limit asked, as a server with
// its own maximum page size would.
type capped struct{ gpucheck.Platform }

func (p capped) ListVGPUs(ctx context.Context, location string, opts vco.ListVGPUsOptions) (vco.VGPUPage, error) {
	opts.Limit = min(opts.Limit, 40)
	return p.Platform.ListVGPUs(ctx, location, opts)
}

// TestScanServerCapsPages: pages shorter than the limit asked for are read through, not
// skipped over.
func TestScanServerCapsPages(t *testing.T) {
	f := gpuchecktest.Seed(t, true)
	rep, err := (&gpucheck.Scanner{Platform: capped{f.Client}, PageSize: 500}).Scan(context.Background(), []string{gpuchecktest.Loc2})
	if err != nil {
		t.Fatal(err)
	}
	if want := gpuchecktest.BulkOrphans + gpuchecktest.BulkForeign; rep.Summary.Reservations != want || !rep.Complete {
		t.Fatalf("read %d of %d, complete %v", rep.Summary.Reservations, want, rep.Complete)
	}
	last := byID(rep)[f.BulkOrphanIDs[len(f.BulkOrphanIDs)-1]] // on the 28th page of 40
	res := (&gpucheck.Releaser{Platform: capped{f.Client}}).Release(context.Background(), []gpucheck.Finding{last})
	if res[0].Outcome != gpucheck.Released || f.Billed(last.ID) {
		t.Fatalf("the re-read did not find a reservation on a later page: %+v", res[0])
	}
}

// TestMergeKeepsIncomplete: an account whose locations could not even be listed keeps the
// merged report incomplete, whatever the next account says.
func TestMergeKeepsIncomplete(t *testing.T) {
	var all gpucheck.Report
	all.Merge(&gpucheck.Report{Complete: false})
	all.Merge(&gpucheck.Report{Complete: true, Locations: []gpucheck.LocationStatus{{Location: "l", Complete: true}}})
	if all.Complete {
		t.Fatal("merged report claims to be complete")
	}
}

// TestScanCompleteUnderChurn: another team releases reservations before the cursor and
// reserves new ones between every two pages (driven by the simulator, page by page): the
// scan still finds every one of 505 orphans, or says it could not; it never reports a
// complete listing that missed one.
func TestScanCompleteUnderChurn(t *testing.T) {
	for _, tc := range []struct {
		name               string
		releases, reserves int
		capped             bool
	}{
		{name: "one released, one reserved", releases: 1, reserves: 1},
		{name: "more released than the pages overlap", releases: 20, reserves: 2},
		{name: "pages capped by the server", releases: 3, reserves: 1, capped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := gpuchecktest.Seed(t, false)
			orphans := gpuchecktest.SeedInterleaved(t, f, gpuchecktest.Loc2, 505)
			f.Sim.SetVGPUListHook(vcosim.TeamChurn(gpuchecktest.TeamPrefix, tc.releases, tc.reserves))
			var p gpucheck.Platform = f.Client
			if tc.capped {
				p = capped{f.Client}
			}
			owners, _ := f.Cluster.Owners(context.Background())
			rep, err := (&gpucheck.Scanner{Platform: p, Owners: owners, PageSize: 50}).Scan(context.Background(), []string{gpuchecktest.Loc2})
			if err != nil {
				t.Fatal(err)
			}
			got := byID(rep)
			var missed []string
			for _, id := range orphans {
				if fd, ok := got[id]; !ok || !fd.Orphan {
					missed = append(missed, id)
				}
			}
			if !rep.Complete || len(missed) > 0 {
				t.Fatalf("complete=%v, %d of %d orphans missed: %v", rep.Complete, len(missed), len(orphans), missed)
			}
		})
	}
}
