package gpucheck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/capx-io/capx/internal/vco"
)

// Platform is what the engine needs of whitesky.cloud; *vco.Client has it.
type Platform interface {
	ListCustomerLocations(ctx context.Context) ([]string, error)
	ListVGPUs(ctx context.Context, location string, opts vco.ListVGPUsOptions) (vco.VGPUPage, error)
	ReleaseUnattachedVGPU(ctx context.Context, location, vgpuID string) error
}

// DefaultPageSize is how many reservations one list call asks for.
const DefaultPageSize = vco.DefaultVGPUPageSize

// Scanner lists and classifies the reservations of one account.
type Scanner struct {
	Platform Platform
	// Account labels findings ("acme at https://…/api/1"); optional.
	Account string
	// Owners is the management cluster's snapshot; nil means ownership is not checked.
	Owners *Owners
	// OwnershipNote says why Owners is nil (printed with the report).
	OwnershipNote string
	// PageSize defaults to DefaultPageSize.
	PageSize int
	// Parallel bounds the locations read at once (default 4).
	Parallel int
	// Now defaults to time.Now.
	Now func() time.Time
	// Progress, when set, is called after every page with how far that location's listing
	// is (read of count); calls may come from several goroutines at once.
	Progress func(location string, read, count int)
}

// IncompleteError says a location's listing could not be read to the end: nothing may be
// concluded from it, least of all "no orphans".
type IncompleteError struct {
	Location string
	Read     int
	Count    int // -1 when not even the first page answered
	Err      error
}

func (e *IncompleteError) Error() string {
	if e.Count < 0 {
		return fmt.Sprintf("location %s: the vGPU list could not be read: %v", e.Location, e.Err)
	}
	return fmt.Sprintf("location %s: the vGPU list stopped after %d of %d reservations: %v", e.Location, e.Read, e.Count, e.Err)
}

func (e *IncompleteError) Unwrap() error { return e.Err }

// ErrListChanged is why a listing is incomplete when it could not be proven complete: the
// list's order changed, or reservations were released faster than it could step back.
var ErrListChanged = vco.ErrListChanged

// Scan reads every location (all of the customer's when locations is empty) and classifies
// what it found. The report covers whatever was read; the error is non-nil when any location
// is incomplete (an *IncompleteError per location, joined) or the locations could not be
// listed.
func (s *Scanner) Scan(ctx context.Context, locations []string) (*Report, error) {
	rep := &Report{OwnershipChecked: s.Owners != nil, OwnershipNote: s.OwnershipNote}
	if len(locations) == 0 {
		all, err := s.Platform.ListCustomerLocations(ctx)
		if err != nil {
			return rep, fmt.Errorf("listing the customer's locations: %w", err)
		}
		locations = all
	}
	locations = slices.Compact(slices.Sorted(slices.Values(locations)))
	type result struct {
		items []vco.VGPU
		err   error
	}
	results := make([]result, len(locations))
	parallel := s.Parallel
	if parallel <= 0 {
		parallel = 4
	}
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, loc := range locations {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			items, err := s.listLocation(ctx, loc)
			results[i] = result{items, err}
		})
	}
	wg.Wait()

	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	var errs []error
	for i, loc := range locations {
		r := results[i]
		st := LocationStatus{Account: s.Account, Location: loc, Reservations: len(r.items), Complete: r.err == nil}
		if r.err != nil {
			st.Error = r.err.Error()
			errs = append(errs, r.err)
		}
		rep.Locations = append(rep.Locations, st)
		for i, v := range r.items {
			res := fromAPI(v, loc)
			res.offset = i
			f := Classify(res, s.Owners, now())
			f.Account = s.Account
			rep.Findings = append(rep.Findings, f)
		}
	}
	sortFindings(rep.Findings)
	rep.summarize()
	rep.Complete = len(errs) == 0
	return rep, errors.Join(errs...)
}

// listLocation reads every reservation of a location, recycle bin included, through
// vco.VGPUListing: overlapping pages, each proven contiguous with what was read, so a list
// other teams change while it is read is still read whole, or is reported incomplete.
func (s *Scanner) listLocation(ctx context.Context, location string) ([]vco.VGPU, error) {
	l := vco.VGPUListing{Limit: s.PageSize}
	if s.Progress != nil {
		l.Progress = func(read, count int) { s.Progress(location, read, count) }
	}
	items, err := l.Read(ctx, pagesOf(s.Platform, location))
	var le *vco.VGPUListError
	if errors.As(err, &le) {
		return items, &IncompleteError{Location: location, Read: le.Read, Count: le.Count, Err: le.Err}
	}
	return items, err
}

// pagesOf reads pages of a location's reservations, recycle bin included.
func pagesOf(p Platform, location string) vco.VGPUPageFunc {
	return func(ctx context.Context, start, limit int) (vco.VGPUPage, error) {
		return p.ListVGPUs(ctx, location, vco.ListVGPUsOptions{Limit: limit, StartAfter: start, IncludeDeleted: true})
	}
}
