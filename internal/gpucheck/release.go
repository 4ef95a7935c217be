package gpucheck

import (
	"context"
	"errors"
	"fmt"

	"github.com/capx-io/capx/internal/vco"
)

// Outcome of one release.
type Outcome string

// The outcomes; part of the -o json contract.
const (
	Released Outcome = "released"
	Skipped  Outcome = "skipped"
	Failed   Outcome = "failed"
	// WouldRelease is a dry run's: selected, not released (nor re-checked).
	WouldRelease Outcome = "would-release"
)

// ReleaseResult is one line of a release.
type ReleaseResult struct {
	Finding `json:",inline"`
	Outcome Outcome `json:"outcome"`
	// Detail says why it was skipped or how it failed.
	Detail string `json:"detail,omitempty"`
}

// Releaser releases orphans permanently, one at a time, each only after checking again that
// nothing changed since it was listed.
type Releaser struct {
	Platform Platform
	// Cluster re-checks the owner of every parsed name just before its release; nil only
	// when the caller deliberately releases unverified reservations.
	Cluster ManagementCluster
	// PageSize of the re-reads; defaults to DefaultPageSize.
	PageSize int
	// Progress, when set, is called with each result as it happens.
	Progress func(ReleaseResult)

	// released are the listing offsets released so far, per location: a release shifts every
	// later reservation one place to the front, which is where the next re-read looks first.
	released map[string][]int
}

// OptIns are what a release may select beyond the Releasable orphans.
type OptIns struct {
	// Renamed: orphans whose names only start with "capvco" (--include-renamed).
	Renamed bool
	// Unverified: orphans whose owner no management cluster checked (--allow-unverified).
	Unverified bool
}

// allows says whether the opt-ins cover the flag a finding needs.
func (o OptIns) allows(needs string) bool {
	return needs == OptInRenamed && o.Renamed || needs == OptInUnverified && o.Unverified
}

// Selectable says whether f may be handed to Release under these opt-ins.
func Selectable(f Finding, o OptIns) bool { return f.Releasable || o.allows(f.ReleaseNeeds) }

// Release releases each finding (all must be Selectable) and returns one result per finding,
// in order. For each, in this order so that the last check is closest to the release: the
// owner is read again from the management cluster (a machine that came back owns it again);
// the reservation is read again from the platform (gone, renamed, attached, restored or
// deleted since the listing: skipped); then it is released permanently with detach=false, so
// a reservation attached in the last instant is refused by the platform instead of detached.
func (r *Releaser) Release(ctx context.Context, findings []Finding) []ReleaseResult {
	out := make([]ReleaseResult, 0, len(findings))
	if r.released == nil {
		r.released = map[string][]int{}
	}
	for _, f := range findings {
		res := r.releaseOne(ctx, f)
		if res.Outcome == Released {
			r.released[f.Location] = append(r.released[f.Location], f.offset)
		}
		if r.Progress != nil {
			r.Progress(res)
		}
		out = append(out, res)
	}
	return out
}

func (r *Releaser) releaseOne(ctx context.Context, f Finding) ReleaseResult {
	skip := func(format string, a ...any) ReleaseResult {
		return ReleaseResult{Finding: f, Outcome: Skipped, Detail: fmt.Sprintf(format, a...)}
	}
	fail := func(err error) ReleaseResult { return ReleaseResult{Finding: f, Outcome: Failed, Detail: err.Error()} }
	if !f.Releasable && f.ReleaseNeeds == "" {
		return skip("not a releasable orphan (%s)", f.Class)
	}
	if ctx.Err() != nil {
		return skip("not tried: %v", context.Cause(ctx))
	}
	switch {
	case f.Owner == nil, r.Cluster == nil && !f.OwnerVerified:
		// Renamed (no owner to ask), or selected as unverified on purpose.
	case f.Class == RecycleBin:
		// No machine uses a reservation in the recycle bin, live or not: the re-read below
		// skips it if it was restored meanwhile.
	case r.Cluster == nil:
		return skip("its owner cannot be re-checked: no management cluster")
	default:
		m, err := r.Cluster.Machine(ctx, f.Owner.Namespace, f.Owner.Machine)
		if err != nil {
			return fail(fmt.Errorf("re-checking the owner: %w", err))
		}
		if m != nil && m.owns(f.Owner) {
			return skip("VCOMachine %s/%s exists again and owns it", m.Namespace, m.Name)
		}
	}
	now, found, err := r.reread(ctx, f)
	switch {
	case err != nil:
		return fail(fmt.Errorf("re-reading the reservation: %w", err))
	case !found:
		return skip("gone since it was listed")
	case !now.same(f.Reservation):
		return skip("changed since it was listed: %s", describeChange(f.Reservation, now))
	}
	switch err := r.Platform.ReleaseUnattachedVGPU(ctx, f.Location, f.ID); {
	case err == nil:
		return ReleaseResult{Finding: f, Outcome: Released}
	case errors.Is(err, vco.ErrConflict):
		return skip("the platform refused: attached since it was re-read (%v)", err)
	case errors.Is(err, vco.ErrNotFound):
		return skip("gone since it was re-read")
	default:
		return fail(err)
	}
}

// reread finds one reservation by id. It looks first in one small page around where the
// listing found it (less the releases before it), then reads the whole location: "gone" is
// concluded only from a complete listing (vco.VGPUListing), never from offset paging that
// somebody else's releases shifted.
func (r *Releaser) reread(ctx context.Context, f Finding) (Reservation, bool, error) {
	location, id := f.Location, f.ID
	const window = 64
	shift := 0
	for _, off := range r.released[location] {
		if off < f.offset {
			shift++
		}
	}
	near := vco.ListVGPUsOptions{Limit: window, StartAfter: max(0, f.offset-shift-window/2), IncludeDeleted: true}
	p, err := r.Platform.ListVGPUs(ctx, location, near)
	if err != nil {
		return Reservation{}, false, err
	}
	for _, v := range p.Items {
		if v.ID == id {
			return fromAPI(v, location), true, nil
		}
	}
	all, err := vco.VGPUListing{Limit: r.PageSize}.Read(ctx, pagesOf(r.Platform, location))
	if err != nil {
		return Reservation{}, false, err
	}
	for _, v := range all {
		if v.ID == id {
			return fromAPI(v, location), true, nil
		}
	}
	return Reservation{}, false, nil
}

func describeChange(was, now Reservation) string {
	switch {
	case was.Name != now.Name:
		return fmt.Sprintf("renamed %q -> %q", was.Name, now.Name)
	case now.Attached() && (!was.Attached() || was.VM.ID != now.VM.ID):
		return "attached to VM " + vmName(now.VM)
	case was.Attached() && !now.Attached():
		return "detached"
	case (was.DeletedAt == nil) != (now.DeletedAt == nil):
		if now.DeletedAt == nil {
			return "restored from the recycle bin"
		}
		return "moved to the recycle bin"
	case was.Profile != now.Profile:
		return fmt.Sprintf("profile %s -> %s", was.Profile, now.Profile)
	}
	return "changed"
}
