package vm

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/capx-io/capx/internal/vco"
)

// TestListingsShareOnlyListingsStartedAfterTheCaller: callers that ask while a listing is in
// flight do not get its answer (it may predate them); they share the next one, which starts
// when the one in flight ends. Nothing is kept afterwards.
func TestListingsShareOnlyListingsStartedAfterTheCaller(t *testing.T) {
	var l Listings
	var calls atomic.Int32
	release := make(chan struct{})
	list := func(context.Context) ([]vco.VM, error) {
		n := calls.Add(1)
		if n == 1 {
			<-release
		}
		return []vco.VM{{ID: int(n)}}, nil
	}
	got := make(chan int, 4)
	ask := func() { askID(t, &l, list, got) }
	go ask()
	waitFor(t, func() bool { return calls.Load() == 1 })
	for range 3 {
		go ask()
	}
	waitFor(t, func() bool { return l.waiting("cs") == 3 })
	close(release)
	ids := map[int]int{}
	for range 4 {
		ids[<-got]++
	}
	if ids[1] != 1 || ids[2] != 3 || calls.Load() != 2 {
		t.Fatalf("answers by listing %v after %d listings; want the first caller's own and one shared by the 3 others", ids, calls.Load())
	}
	waitFor(t, func() bool { return l.keys() == 0 })
	go ask()
	if id := <-got; id != 3 {
		t.Fatalf("a caller after the wave got listing %d: a finished listing was kept", id)
	}
}

// TestListingsKeysAreSeparate: another key (cloudspace or credential) never shares a listing.
func TestListingsKeysAreSeparate(t *testing.T) {
	var l Listings
	release := make(chan struct{})
	var wg sync.WaitGroup
	for _, key := range []string{"a", "b"} {
		wg.Go(func() {
			vms, _ := l.List(context.Background(), key, func(context.Context) ([]vco.VM, error) {
				<-release
				return []vco.VM{{Name: key}}, nil
			})
			if len(vms) != 1 || vms[0].Name != key {
				t.Errorf("key %s got %v", key, vms)
			}
		})
	}
	close(release)
	wg.Wait()
}

// TestListingsCallerGivesUp: a waiting caller whose context ends returns its error; the
// listing still answers the others.
func TestListingsCallerGivesUp(t *testing.T) {
	var l Listings
	release := make(chan struct{})
	var calls atomic.Int32
	list := func(context.Context) ([]vco.VM, error) {
		if calls.Add(1) == 1 {
			<-release
		}
		return nil, nil
	}
	done := make(chan error, 3)
	go func() { _, err := l.List(context.Background(), "cs", list); done <- err }()
	waitFor(t, func() bool { return calls.Load() == 1 })
	go func() { _, err := l.List(context.Background(), "cs", list); done <- err }() // leads the next
	waitFor(t, func() bool { return l.waiting("cs") == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, err := l.List(ctx, "cs", list); done <- err }()
	waitFor(t, func() bool { return l.waiting("cs") == 2 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up got %v", err)
	}
	close(release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestListingsWaveSharesOneListing: the lookups of machines reconciled together (Begin) are
// one listing, started Gather after the first of them asked (by the injected clock).
func TestListingsWaveSharesOneListing(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	l := Listings{Clock: clk, Gather: time.Second}
	var calls atomic.Int32
	list := func(context.Context) ([]vco.VM, error) { return []vco.VM{{ID: int(calls.Add(1))}}, nil }
	ends := []func(){l.Begin("cs"), l.Begin("cs"), l.Begin("cs"), l.Begin("other")}
	got := make(chan int, 3)
	for range 3 {
		go askID(t, &l, list, got)
	}
	waitFor(t, func() bool { return l.waiting("cs") == 3 })
	clk.Step(999 * time.Millisecond)
	if calls.Load() != 0 {
		t.Fatalf("the listing started %d times before Gather passed", calls.Load())
	}
	clk.Step(time.Millisecond)
	for range 3 {
		if id := <-got; id != 1 {
			t.Errorf("answer of listing %d; want the one listing of the wave", id)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("%d listings for a wave of 3", calls.Load())
	}
	for _, end := range ends {
		end()
		end() // a second call is a no-op
	}
	clk.Step(4 * time.Second)
	l.Begin("x")()
	if l.keys() != 1 {
		t.Fatalf("%d keys kept after the waves ended (want only the new one)", l.keys())
	}
}

// TestListingsWaveEnds: once the other machines' Begins are 4 Gathers old and they ended, a
// machine is alone again and lists at once.
func TestListingsWaveEnds(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	l := Listings{Clock: clk, Gather: time.Second}
	l.Begin("cs")()
	clk.Step(3 * time.Second)
	end := l.Begin("cs")
	if w := l.state["cs"].wave(clk.Now(), time.Second); !w {
		t.Fatal("a Begin 3 s ago (within 4 Gathers) is not part of the wave")
	}
	clk.Step(time.Second)
	if _, err := l.List(context.Background(), "cs", func(context.Context) ([]vco.VM, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	end()
}

// TestListingsAloneNeverWaits: a machine alone in its wave lists at once.
func TestListingsAloneNeverWaits(t *testing.T) {
	l := Listings{Clock: clocktesting.NewFakeClock(time.Now())}
	end := l.Begin("cs")
	defer end()
	for range 2 { // the lookup before the create and the one after
		if _, err := l.List(context.Background(), "cs", func(context.Context) ([]vco.VM, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNilListingsLists(t *testing.T) {
	var l *Listings
	vms, err := l.List(context.Background(), "cs", func(context.Context) ([]vco.VM, error) { return []vco.VM{{ID: 7}}, nil })
	if err != nil || len(vms) != 1 || vms[0].ID != 7 {
		t.Fatalf("%v %v", vms, err)
	}
}

// askID lists key "cs" and sends the id of the one VM it got (0 on an error).
func askID(t *testing.T, l *Listings, list func(context.Context) ([]vco.VM, error), got chan<- int) {
	vms, err := l.List(context.Background(), "cs", list)
	if err != nil || len(vms) != 1 {
		t.Errorf("List: %v, %v", vms, err)
		got <- 0
		return
	}
	got <- vms[0].ID
}

// waitFor polls cond: the goroutines under test reach their waits in their own time.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within a minute")
		}
	}
}
