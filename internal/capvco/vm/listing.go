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
const DefaultGather = 200 * time.Millisecond

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
// A wave: while machines of a key are reconciled together (another one began, with Begin,
// within the last 4 Gathers), a listing starts Gather after its first caller asked, so that the
// lookups of the wave (one machine's before its create, another's after it, the reads of a
// resync) become one listing instead of one each. A machine alone never waits.
type Listings struct {
	// Gather is how long a listing of a wave collects callers (0: DefaultGather).
	Gather time.Duration
	// Clock times it (nil: the real clock).
	Clock clock.Clock

	mu    sync.Mutex
	state map[string]*listings
}

// listings is one key's listing in flight, the one collecting callers, and the wave.
type listings struct {
	current, pending *listing
	// active is how many machines of the key are between Begin and its end; began are the
	// times of the Begins within the last 4 Gathers.
	active int
	began  []time.Time
}

type listing struct {
	done    chan struct{}
	callers int // how many callers it answers
	vms     []vco.VM
	err     error
}

// Begin counts a machine of key into the wave until the returned function is called (once,
// when its lookups are over).
func (l *Listings) Begin(key string) (end func()) {
	if l == nil {
		return func() {}
	}
	l.mu.Lock()
	s := l.keyState(key)
	s.active++
	s.began = append(s.began, l.clock().Now())
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			s.active--
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
		l.mu.Unlock()
		return w.wait(ctx)
	}
	w, prev := &listing{done: make(chan struct{}), callers: 1}, s.current
	s.pending = w
	wave := s.wave(l.clock().Now(), l.gather())
	l.mu.Unlock()

	// Callers join w, so w runs even if this caller gives up: it is theirs too. prev is a
	// listing call, bounded by the client's own timeouts.
	if wave {
		<-l.clock().After(l.gather())
	}
	if prev != nil {
		<-prev.done
	}
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

// keyState is key's state, created when absent; l.mu is held. Keys of waves that are over
// are dropped on the way.
func (l *Listings) keyState(key string) *listings {
	if l.state == nil {
		l.state = map[string]*listings{}
	}
	for k, s := range l.state {
		l.forget(k, s)
	}
	s := l.state[key]
	if s == nil {
		s = &listings{}
		l.state[key] = s
	}
	return s
}

// forget drops key once nothing of it is in flight, waiting, active or recent; l.mu is held.
func (l *Listings) forget(key string, s *listings) {
	s.began = slices.DeleteFunc(s.began, func(t time.Time) bool { return l.clock().Since(t) >= 4*l.gather() })
	if s.current == nil && s.pending == nil && s.active <= 0 && len(s.began) == 0 {
		delete(l.state, key)
	}
}

// wave says whether machines of the key are reconciled together: more than one is between
// Begin and its end, or another began within the last 4 Gathers; l.mu is held.
func (s *listings) wave(now time.Time, gather time.Duration) bool {
	recent := 0
	for _, t := range s.began {
		if now.Sub(t) < 4*gather {
			recent++
		}
	}
	return s.active > 1 || recent > 1
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
