package vm

import (
	"context"
	"slices"
	"sync"

	"github.com/capx-io/capx/internal/vco"
)

// Listings lets the machines of one cloudspace that are reconciled at the same time share a VM
// listing: creating a VM safely costs a lookup by name before the create and one after it, and
// the API lists VMs only per cloudspace, so n machines created together cost 2n listings of the
// same cloudspace (issue 27: 2.01 listings per machine).
//
// A caller joins the listing that has not started yet, or starts the next one, which runs once
// the listing in flight ends. A listing therefore always starts after every caller it answers
// asked for it: it is exactly as fresh as the caller's own call would have been, never older,
// so sharing it changes no decision. Nothing is kept once a listing has been handed out: the
// next caller lists again. The zero value is ready; a nil *Listings lists for every caller.
type Listings struct {
	mu    sync.Mutex
	state map[string]*listings
}

// listings is one key's listing in flight and the one collecting callers.
type listings struct {
	current, pending *listing
}

type listing struct {
	done    chan struct{}
	callers int // how many callers it answers
	vms     []vco.VM
	err     error
}

// List returns the VMs that list reads, shared with the callers of the same key that asked
// while this one waited. key must name the cloudspace and the credential (callers of one key
// get one answer).
func (l *Listings) List(ctx context.Context, key string, list func(context.Context) ([]vco.VM, error)) ([]vco.VM, error) {
	if l == nil {
		return list(ctx)
	}
	l.mu.Lock()
	if l.state == nil {
		l.state = map[string]*listings{}
	}
	s := l.state[key]
	if s == nil {
		s = &listings{}
		l.state[key] = s
	}
	if w := s.pending; w != nil {
		w.callers++
		l.mu.Unlock()
		return w.wait(ctx)
	}
	w, prev := &listing{done: make(chan struct{}), callers: 1}, s.current
	s.pending = w
	l.mu.Unlock()

	if prev != nil {
		// Callers joined w, so w runs even if this caller gives up: it is theirs too. prev is a
		// listing call, bounded by the client's own timeouts.
		<-prev.done
	}
	l.mu.Lock()
	s.pending, s.current = nil, w
	l.mu.Unlock()
	w.vms, w.err = list(ctx)
	close(w.done)
	l.mu.Lock()
	if s.current == w && s.pending == nil {
		delete(l.state, key)
	}
	l.mu.Unlock()
	return slices.Clone(w.vms), w.err
}

func (w *listing) wait(ctx context.Context) ([]vco.VM, error) {
	select {
	case <-w.done:
		return slices.Clone(w.vms), w.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// waiting is how many callers of key wait for a listing that has not started (for tests).
func (l *Listings) waiting(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.state[key]; s != nil && s.pending != nil {
		return s.pending.callers
	}
	return 0
}

// keys is how many keys have a listing in flight or waiting (for tests: none once all answered).
func (l *Listings) keys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.state)
}
