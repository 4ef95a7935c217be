package vm

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/capx-io/capx/internal/vco"
)

// DefaultGather is Listings.Gather's default: short beside a VM create (the API blocks about
// 2 s until the VM is deployed), long beside a reconcile's own Kubernetes calls.
const DefaultGather = 250 * time.Millisecond

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
//
// A wave: the machines of a key that are inside a create at once (Begin to its end) are one
// wave. A listing waits, at most Gather after its first caller asked, until every machine of
// the wave waits for it, so the lookups of a wave (one machine's before its create, another's
// after) become one listing instead of one each. A machine alone in its wave never waits.
type Listings struct {
	// Gather bounds how long a listing waits for the rest of its wave (0: DefaultGather).
	Gather time.Duration
	// Clock times the wait (nil: the real clock).
	Clock clock.Clock

	mu    sync.Mutex
	state map[string]*listings
}

// listings is one key's listing in flight, the one collecting callers, and the wave.
type listings struct {
	current, pending *listing
	// active is how many machines of the key are between Begin and its end.
	active int
}

type listing struct {
	done chan struct{}
	// full is closed once every active machine of the key waits for this listing.
	full    chan struct{}
	callers int // how many callers it answers
	vms     []vco.VM
	err     error
}

// Begin counts a machine of key into the wave until the returned function is called (once,
// when its create and the lookups around it are over).
func (l *Listings) Begin(key string) (end func()) {
	if l == nil {
		return func() {}
	}
	l.mu.Lock()
	l.keyState(key).active++
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			s := l.state[key]
			s.active--
			s.checkFull()
			l.forget(key, s)
		})
	}
}

// List returns the VMs that list reads, shared with the callers of the same key that asked
// while this one waited. key must name the cloudspace and the credential (callers of one key
// get one answer).
func (l *Listings) List(ctx context.Context, key string, list func(context.Context) ([]vco.VM, error)) ([]vco.VM, error) {
	if l == nil {
		return list(ctx)
	}
	l.mu.Lock()
	s := l.keyState(key)
	if w := s.pending; w != nil {
		w.callers++
		s.checkFull()
		l.mu.Unlock()
		return w.wait(ctx)
	}
	w, prev := &listing{done: make(chan struct{}), full: make(chan struct{}), callers: 1}, s.current
	s.pending = w
	s.checkFull()
	l.mu.Unlock()

	// Callers join w, so w runs even if this caller gives up: it is theirs too. prev is a
	// listing call, bounded by the client's own timeouts; the wave's wait by Gather.
	timer := l.clock().NewTimer(l.gather())
	if prev != nil {
		<-prev.done
	}
	select {
	case <-w.full:
	case <-timer.C():
	}
	timer.Stop()
	l.mu.Lock()
	s.pending, s.current = nil, w
	l.mu.Unlock()
	w.vms, w.err = list(ctx)
	close(w.done)
	l.mu.Lock()
	if s.current == w {
		s.current = nil
	}
	l.forget(key, s)
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

// keyState is key's state, created when absent; l.mu is held.
func (l *Listings) keyState(key string) *listings {
	if l.state == nil {
		l.state = map[string]*listings{}
	}
	s := l.state[key]
	if s == nil {
		s = &listings{}
		l.state[key] = s
	}
	return s
}

// forget drops key once nothing of it is in flight, waiting or active; l.mu is held.
func (l *Listings) forget(key string, s *listings) {
	if s.current == nil && s.pending == nil && s.active <= 0 {
		delete(l.state, key)
	}
}

// checkFull lets the pending listing start once every active machine waits for it; l.mu is
// held. Callers outside any wave (no Begin) count as waiting.
func (s *listings) checkFull() {
	w := s.pending
	if w == nil || w.callers < s.active {
		return
	}
	select {
	case <-w.full:
	default:
		close(w.full)
	}
}

func (l *Listings) gather() time.Duration {
	if l.Gather > 0 {
		return l.Gather
	}
	return DefaultGather
}

func (l *Listings) clock() clock.Clock {
	if l.Clock != nil {
		return l.Clock
	}
	return clock.RealClock{}
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
