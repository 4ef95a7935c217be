package vcosim

import (
	"fmt"
	"slices"
	"strings"
)

// VGPUListHook runs before a vGPU list call is answered, with the simulator's lock held. It
// may change the listed location's reservations through a, as another team working in the
// same account does while a tool is between two pages: tests drive that churn
// deterministically, page by page, instead of racing a goroutine against the clock.
type VGPUListHook func(a *VGPUAccount, startAfter int)

// SetVGPUListHook installs h for every later vGPU list call; nil removes it.
func (s *Sim) SetVGPUListHook(h VGPUListHook) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vgpuListHook = h
}

// VGPUAccount is one customer's location as a VGPUListHook sees it: only valid during the
// hook.
type VGPUAccount struct {
	s                           *Sim
	customer, location          string
	includeDeleted, onlyDeleted bool
	changed                     bool
}

// VGPUEntry is one reservation in listing order.
type VGPUEntry struct {
	ID, Name string
	Deleted  bool
}

// Listed returns the reservations the call being answered lists (its deleted filters
// applied), in listing order: the positions start_after counts.
func (a *VGPUAccount) Listed() []VGPUEntry {
	var out []VGPUEntry
	for _, v := range a.s.st.vgpusIn(a.customer, a.location) {
		if listedVGPU(v, a.includeDeleted, a.onlyDeleted) {
			out = append(out, VGPUEntry{ID: v.ID, Name: v.Name, Deleted: v.DeletedAt != nil})
		}
	}
	return out
}

// Release releases a reservation permanently.
func (a *VGPUAccount) Release(id string) error {
	v := a.s.st.VGPUs[id]
	if v == nil || v.Customer != a.customer || v.Location != a.location {
		return fmt.Errorf("no vGPU %q in %s", id, a.location)
	}
	delete(a.s.st.VGPUs, id)
	a.s.st.VGPUOrder = slices.DeleteFunc(a.s.st.VGPUOrder, func(o string) bool { return o == id })
	a.changed = true
	return nil
}

// Reserve reserves an unattached vGPU of the location's first profile (skipping its
// instance limit) and returns its id.
func (a *VGPUAccount) Reserve(name string) (string, error) {
	loc := a.s.st.Locations[a.location]
	if loc == nil || len(loc.GPUProfiles) == 0 {
		return "", fmt.Errorf("no GPU profile in %s", a.location)
	}
	a.changed = true
	return a.s.reserve(a.customer, a.location, loc.GPUProfiles[0], name, 0, a.s.opts.Now().Unix()).ID, nil
}

// runVGPUListHook calls the hook for a list call; s.mu is held.
func (s *Sim) runVGPUListHook(customer, location string, start int, includeDeleted, onlyDeleted bool) error {
	if s.vgpuListHook == nil {
		return nil
	}
	a := &VGPUAccount{s: s, customer: customer, location: location, includeDeleted: includeDeleted, onlyDeleted: onlyDeleted}
	s.vgpuListHook(a, start)
	if a.changed {
		return s.persist()
	}
	return nil
}

// TeamChurn is another team reserving and releasing vGPUs in the account while a tool pages
// through it: before every page but the first (start_after > 0), it permanently releases
// up to `releases` of its own reservations (names starting with prefix) that lie before the
// offset, nearest the offset first, so every later reservation moves towards the front; then
// it reserves `reserves` new ones, which are listed last. The numbers of reservations before
// and after a page are what offset paging trips over.
func TeamChurn(prefix string, releases, reserves int) VGPUListHook {
	n := 0
	return func(a *VGPUAccount, start int) {
		if start <= 0 {
			return
		}
		listed := a.Listed()
		done := 0
		for i := min(start, len(listed)) - 1; i >= 0 && done < releases; i-- {
			if strings.HasPrefix(listed[i].Name, prefix) && a.Release(listed[i].ID) == nil {
				done++
			}
		}
		for range reserves {
			n++
			_, _ = a.Reserve(fmt.Sprintf("%snew-%d", prefix, n))
		}
	}
}
