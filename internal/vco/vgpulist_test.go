package vco_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// churnCases are other teams' work between two pages, driven by the simulator before every
// page but the first, so the tests cannot pass by luck of timing.
var churnCases = []struct {
	name               string
	releases, reserves int
}{
	// One released before the cursor and one reserved: the count holds, the offset shifts
	// by one, and plain offset paging skips the reservation on the page boundary.
	{"one released, one reserved", 1, 1},
	// More released before the cursor than the pages overlap (12 for pages of 50).
	{"twenty released, two reserved", 20, 2},
	{"forty released", 40, 0},
}

// seedInterleaved reserves n reservations named mine-<i>, each after one of the other team's
// (team-b-<i>), and returns the ids of the former.
func seedInterleaved(t testing.TB, sim *vcosim.Server, location string, n int) []string {
	t.Helper()
	names := make([]string, 0, 2*n)
	for i := range n {
		names = append(names, fmt.Sprintf("team-b-%d", i), fmt.Sprintf("mine-%d", i))
	}
	ids, err := sim.ReserveVGPUs(vcosim.SeedCustomer, location, vcosim.SeedStubGPUProfile, names...)
	if err != nil {
		t.Fatal(err)
	}
	var mine []string
	for i := 1; i < len(ids); i += 2 {
		mine = append(mine, ids[i])
	}
	return mine
}

// TestListAllVGPUsUnderChurn: the listing the provider's teardowns rely on finds every
// reservation that existed throughout, while another team releases reservations before the
// cursor and reserves new ones between every two pages.
func TestListAllVGPUsUnderChurn(t *testing.T) {
	for _, tc := range churnCases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, vcosim.Options{})
			mine := seedInterleaved(t, e.sim, loc, 300)
			e.sim.SetVGPUListHook(vcosim.TeamChurn("team-b-", tc.releases, tc.reserves))
			all, err := e.cluster.ListAllVGPUs(e.ctx, loc, vco.ListVGPUsOptions{Limit: 50, IncludeDeleted: true})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, v := range all {
				if got[v.ID] {
					t.Fatalf("%s listed twice", v.ID)
				}
				got[v.ID] = true
			}
			var missed []string
			for _, id := range mine {
				if !got[id] {
					missed = append(missed, id)
				}
			}
			if len(missed) > 0 {
				t.Fatalf("the listing missed %d of %d reservations that existed throughout: %v", len(missed), len(mine), missed)
			}
		})
	}
}

// TestFindVGPUsUnderChurn: the lookup a machine makes before it reserves (a miss reserves a
// second, billed reservation) finds a reservation on the default page boundary under churn.
func TestFindVGPUsUnderChurn(t *testing.T) {
	e := newEnv(t, vcosim.Options{})
	names := make([]string, vco.DefaultVGPUPageSize, vco.DefaultVGPUPageSize+1)
	for i := range names {
		names[i] = fmt.Sprintf("team-b-%d", i)
	}
	names = append(names, "capvco_ns_c1_m1_gpu_0") // first of the second page
	ids, err := e.sim.ReserveVGPUs(vcosim.SeedCustomer, loc, vcosim.SeedStubGPUProfile, names...)
	e.must(err)
	e.sim.SetVGPUListHook(vcosim.TeamChurn("team-b-", 1, 1))
	found, err := e.cluster.FindVGPUs(e.ctx, loc, "capvco_ns_c1_m1_gpu_0")
	if err != nil || len(found) != 1 || found[0].ID != ids[len(ids)-1] {
		t.Fatalf("found %+v, err %v", found, err)
	}
}

// list is an in-memory vGPU list in a stable order, for the listing's pure tests.
type list struct {
	ids     []string
	next    int
	between func(l *list, page, start int) // runs before every page
	pages   int
	capAt   int // answer at most this many a page (0: the limit)
}

func (l *list) reserve() string {
	l.next++
	id := fmt.Sprintf("v%05d", l.next)
	l.ids = append(l.ids, id)
	return id
}

func (l *list) release(i int) { l.ids = slices.Delete(l.ids, i, i+1) }

func (l *list) page(_ context.Context, start, limit int) (vco.VGPUPage, error) {
	if l.between != nil {
		l.between(l, l.pages, start)
	}
	l.pages++
	if l.capAt > 0 {
		limit = min(limit, l.capAt)
	}
	p := vco.VGPUPage{Count: len(l.ids), Limit: limit}
	for _, id := range l.ids[min(start, len(l.ids)):min(start+limit, len(l.ids))] {
		p.Items = append(p.Items, vco.VGPU{ID: id})
	}
	return p, nil
}

// TestVGPUListingRefusesAnUnstableOrder: a server whose order changes between pages cannot be
// paged by offset; the listing says so instead of returning what it happened to see.
func TestVGPUListingRefusesAnUnstableOrder(t *testing.T) {
	l := &list{}
	for range 100 {
		l.reserve()
	}
	l.between = func(l *list, page, _ int) {
		if page > 0 {
			slices.Reverse(l.ids)
		}
	}
	_, err := vco.VGPUListing{Limit: 30}.Read(context.Background(), l.page)
	var le *vco.VGPUListError
	if !errors.Is(err, vco.ErrListChanged) || !errors.As(err, &le) {
		t.Fatalf("err = %v, want a VGPUListError wrapping ErrListChanged", err)
	}
}

// TestVGPUListingRefusesAServerIgnoringOffsets: a server (or proxy) that drops start_after
// answers the first page to every request; the listing must not end "complete" with it.
func TestVGPUListingRefusesAServerIgnoringOffsets(t *testing.T) {
	l := &list{}
	for range 5000 {
		l.reserve()
	}
	first := func(ctx context.Context, _, limit int) (vco.VGPUPage, error) { return l.page(ctx, 0, limit) }
	all, err := vco.VGPUListing{Limit: 500}.Read(context.Background(), first)
	if !errors.Is(err, vco.ErrListChanged) {
		t.Fatalf("err = %v with %d of 5000 read, want ErrListChanged", err, len(all))
	}
}

// TestVGPUListingGivesUpOnEndlessRelease: releases before the cursor on every page, faster
// than the listing steps back, end in ErrListChanged, not in a loop or a short list.
func TestVGPUListingGivesUpOnEndlessRelease(t *testing.T) {
	l := &list{}
	for range 2000 {
		l.reserve()
	}
	// Everything before the cursor goes, and as many are reserved: a queue the listing
	// can never catch up with.
	l.between = func(l *list, _, start int) {
		n := min(start, len(l.ids))
		l.ids = slices.Delete(l.ids, 0, n)
		for range n {
			l.reserve()
		}
	}
	_, err := vco.VGPUListing{Limit: 10}.Read(context.Background(), l.page)
	if !errors.Is(err, vco.ErrListChanged) {
		t.Fatalf("err = %v, want ErrListChanged", err)
	}
}

// TestVGPUListingServerCapsPages: a server answering fewer than asked is read through.
func TestVGPUListingServerCapsPages(t *testing.T) {
	l := &list{capAt: 7}
	for range 200 {
		l.reserve()
	}
	want := slices.Clone(l.ids)
	all, err := vco.VGPUListing{Limit: 500}.Read(context.Background(), l.page)
	if err != nil || len(all) != len(want) {
		t.Fatalf("%d of %d, err %v", len(all), len(want), err)
	}
}

// FuzzVGPUListing drives arbitrary churn (releases anywhere, reservations at the end) and
// page caps through the listing: it either says the list changed, or it returned every
// reservation that existed from the first page to the last, each once.
func FuzzVGPUListing(f *testing.F) {
	f.Add(uint16(505), uint8(50), uint8(0), []byte{1, 1, 1, 1, 1, 1, 1, 1})
	f.Add(uint16(1000), uint8(25), uint8(10), []byte{40, 0, 200, 3, 255, 9})
	f.Add(uint16(3), uint8(1), uint8(1), []byte{0})
	f.Add(uint16(0), uint8(0), uint8(0), []byte{})
	f.Fuzz(func(t *testing.T, n uint16, limit, capAt uint8, ops []byte) {
		l := &list{capAt: int(capAt)}
		for range int(n % 4000) {
			l.reserve()
		}
		released := map[string]bool{}
		l.between = func(l *list, page, start int) {
			if page == 0 || len(ops) == 0 {
				return
			}
			op := ops[page%len(ops)]
			// Low bits: how many to release; high bit: near the cursor or from the front.
			for k := range int(op & 0x3f) {
				if len(l.ids) == 0 {
					break
				}
				i := k % len(l.ids)
				if op&0x80 != 0 {
					if i = min(start, len(l.ids)) - 1 - k; i < 0 {
						break
					}
				}
				released[l.ids[i]] = true
				l.release(i)
			}
			if op&0x40 != 0 {
				l.reserve()
			}
		}
		before := slices.Clone(l.ids)
		all, err := vco.VGPUListing{Limit: int(limit)}.Read(context.Background(), l.page)
		if err != nil {
			if !errors.Is(err, vco.ErrListChanged) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		got := map[string]bool{}
		for _, v := range all {
			if got[v.ID] {
				t.Fatalf("%s returned twice", v.ID)
			}
			got[v.ID] = true
		}
		for _, id := range before {
			if !released[id] && !got[id] {
				t.Fatalf("%s existed throughout but was not returned (%d pages)", id, l.pages)
			}
		}
	})
}
