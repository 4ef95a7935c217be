package vco

import (
	"context"
	"errors"
	"fmt"
)

// The vGPU list is paged by offset (start_after), and other teams reserve and release in the
// same account while a listing is between two pages. A release before the cursor moves every
// later reservation one place to the front, so the next page, read at the old offset, skips
// the reservation that moved onto the boundary; a reservation made meanwhile keeps the count
// the same, so neither the count nor the number of distinct ids gives it away. A listing that
// misses a reservation is worse than a failed one: gpucheck would report "no orphans", a
// teardown would leave a billed reservation behind.
//
// VGPUListing therefore reads overlapping pages: every page after the first starts a few
// places before the previous one ended and must hold a reservation already read. The list's
// order is stable (reservation order in the simulator; offset paging means nothing
// otherwise), so a page that holds a reservation already read is contiguous with what was
// read: nothing between them can have been skipped, however many were released or reserved
// before the cursor. A page that holds none (more was released before the cursor than the
// overlap covers) is read again further back, down to offset 0 if need be. A page whose
// reservations already read come in another order than they were read proves the order is
// not stable, and the listing is read again from the start. The listing ends at the first
// page that reaches the count the server gave with it, having read at least that many
// distinct reservations (new ones are listed after the old, so every one listed at the end
// was read): fewer means the pages did not follow the offsets. What it returns is every
// reservation that existed from the first page to the last, plus some reserved meanwhile.

// VGPUPageFunc reads the page of at most limit reservations starting at offset start.
type VGPUPageFunc func(ctx context.Context, start, limit int) (VGPUPage, error)

// ErrListChanged says a listing could not be proven complete: its order changed between
// pages, or reservations were released before the cursor faster than it could step back. It
// is transient (ErrUnavailable): the next listing may well succeed.
var ErrListChanged = fmt.Errorf("the vGPU list changed under the listing faster than it could be read, or its order is not stable (%w); run again", ErrUnavailable)

// VGPUListError says a listing stopped before the end; what was read is returned with it.
type VGPUListError struct {
	Read  int // distinct reservations read
	Count int // the count the last page gave; -1 when no page answered
	Err   error
}

func (e *VGPUListError) Error() string {
	if e.Count < 0 {
		return fmt.Sprintf("the vGPU list could not be read: %v", e.Err)
	}
	return fmt.Sprintf("the vGPU list stopped after %d of %d reservations: %v", e.Read, e.Count, e.Err)
}

func (e *VGPUListError) Unwrap() error { return e.Err }

// VGPUListing reads a whole vGPU list through a VGPUPageFunc.
type VGPUListing struct {
	// Limit is the page size asked for (default DefaultVGPUPageSize, at least 2). A server
	// may answer fewer per page: the offset advances by what a page held.
	Limit int
	// Progress, when set, is told after every page how many distinct reservations were read
	// and how many the list holds now.
	Progress func(read, count int)
}

const (
	// maxOverlap is the most places before the previous page's end the next page starts:
	// that many releases before the cursor between two pages cost no extra call.
	maxOverlap = 16
	// vgpuListAttempts bounds how often a listing whose order changed is read again.
	vgpuListAttempts = 3
	// maxIdlePages bounds the pages in a row that add nothing new (steps back, re-reads): a
	// server that ignores start_after answers the same page for ever.
	maxIdlePages = 64
)

// overlap is how far the page after one of n reservations starts before its end: a quarter
// of it, at least one (so it can overlap) and at most n-1 (so the listing moves forward).
func overlap(n int) int { return max(1, min(maxOverlap, n/4, n-1)) }

// pageBudget bounds the pages of one listing: four times what the first page's count needs
// at its pace, and some for stepping back. A list that grows or shrinks before the cursor
// as fast as it is read is not converging; it is not followed forever.
func pageBudget(count, perPage int) int { return 64 + 4*(count/max(1, perPage)+1) }

// Read pages through the whole list. On error it returns what was read and a
// *VGPUListError.
func (l VGPUListing) Read(ctx context.Context, page VGPUPageFunc) ([]VGPU, error) {
	limit := l.Limit
	if limit <= 0 {
		limit = DefaultVGPUPageSize
	}
	limit = max(limit, 2) // pages of one cannot overlap
	var (
		all []VGPU
		err error
	)
	for range vgpuListAttempts {
		all, err = l.readOnce(ctx, page, limit)
		if !errors.Is(err, errOrderChanged) {
			return all, err
		}
	}
	return all, err
}

var errOrderChanged = fmt.Errorf("reservations already read came back in another order: %w", ErrListChanged)

func (l VGPUListing) readOnce(ctx context.Context, page VGPUPageFunc, limit int) ([]VGPU, error) {
	read := map[string]int{} // id -> position in all
	var all []VGPU
	start, count, back, idle, budget := 0, -1, 0, 0, maxVGPUPages
	fail := func(err error) ([]VGPU, error) {
		return all, &VGPUListError{Read: len(all), Count: count, Err: err}
	}
	for pages := 1; ; pages++ {
		if pages > min(budget, maxVGPUPages) || idle > maxIdlePages {
			return fail(fmt.Errorf("%d pages read and the end not reached: %w", pages-1, ErrListChanged))
		}
		p, err := page(ctx, start, limit)
		if err != nil {
			return fail(err)
		}
		count = p.Count
		overlaps, ordered := overlapOf(p.Items, read)
		if !ordered {
			return fail(errOrderChanged)
		}
		if start > 0 && !overlaps {
			// More was released before the cursor than the overlap covers: step back,
			// twice as far each time, until a page reaches what was read (offset 0
			// always does).
			back = max(2*back, maxOverlap)
			start = max(0, start-back)
			idle++
			continue
		}
		back = 0
		idle++
		for _, v := range p.Items {
			if _, seen := read[v.ID]; !seen {
				read[v.ID] = len(all)
				all = append(all, v)
				idle = 0
			}
		}
		if l.Progress != nil {
			l.Progress(len(all), max(count, len(all)))
		}
		end := start + len(p.Items)
		switch {
		case end >= p.Count && len(all) < p.Count:
			// Every reservation listed at the end was read (new ones are listed after the
			// old), plus those released meanwhile: fewer than the count means pages did not
			// follow the offsets (a server or proxy that ignores start_after).
			return fail(fmt.Errorf("the end was reached with %d distinct reservations read of %d counted: %w", len(all), p.Count, ErrListChanged))
		case end >= p.Count:
			return all, nil
		case len(p.Items) == 0:
			return fail(fmt.Errorf("the page at offset %d came back empty while %d reservations are counted: %w", start, p.Count, ErrListChanged))
		case len(p.Items) == 1:
			return fail(fmt.Errorf("the server answers one reservation a page: too few to overlap pages: %w", ErrListChanged))
		}
		ov := overlap(len(p.Items))
		if pages == 1 {
			budget = pageBudget(p.Count, len(p.Items)-ov)
		}
		start = end - ov
	}
}

// overlapOf says whether the page holds a reservation already read, and whether the ones it
// holds come in the order they were read.
func overlapOf(items []VGPU, read map[string]int) (overlaps, ordered bool) {
	prev := -1
	for _, v := range items {
		pos, seen := read[v.ID]
		if !seen {
			continue
		}
		if pos <= prev {
			return true, false
		}
		prev, overlaps = pos, true
	}
	return overlaps, true
}
