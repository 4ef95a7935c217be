package vm

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	ask := func() {
		vms, err := l.List(context.Background(), "cs", list)
		if err != nil || len(vms) != 1 {
			t.Errorf("List: %v, %v", vms, err)
			got <- 0
			return
		}
		got <- vms[0].ID
	}
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

func TestNilListingsLists(t *testing.T) {
	var l *Listings
	vms, err := l.List(context.Background(), "cs", func(context.Context) ([]vco.VM, error) { return []vco.VM{{ID: 7}}, nil })
	if err != nil || len(vms) != 1 || vms[0].ID != 7 {
		t.Fatalf("%v %v", vms, err)
	}
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
