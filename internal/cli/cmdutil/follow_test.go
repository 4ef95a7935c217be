package cmdutil

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// Each step below moves the fake clock on by the interval before it returns, so the follower's
// ticker has fired by the time it waits: the test runs without sleeping and without races.

func TestFollowPrintsEachNewProgressOnce(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	var out bytes.Buffer
	lines := []string{"Pending", "Pending", "Approved, apply Job j1 running", "Applied"}
	calls := 0
	err := Follower{ErrOut: &out, Clock: clk, Interval: 2 * time.Second, Timeout: time.Minute}.Follow(context.Background(),
		func(context.Context) (string, bool, error) {
			defer clk.Step(2 * time.Second)
			p := lines[calls]
			calls++
			return p, p == "Applied", nil
		})
	if err != nil {
		t.Fatal(err)
	}
	want := "10:00:00  Pending\n10:00:04  Approved, apply Job j1 running\n10:00:06  Applied\n"
	if out.String() != want {
		t.Errorf("progress:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestFollowEndsAfterTheTimeoutByTheClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	calls := 0
	err := Follower{ErrOut: &bytes.Buffer{}, Clock: clk, Interval: 10 * time.Second, Timeout: 30 * time.Second}.Follow(context.Background(),
		func(context.Context) (string, bool, error) {
			defer clk.Step(10 * time.Second)
			calls++
			return "Pending", false, nil
		})
	var ended *WaitEnded
	if !errors.As(err, &ended) || ended.Waited != "after 30s" {
		t.Fatalf("got %v, want the wait ended after 30s", err)
	}
	if calls != 3 {
		t.Errorf("asked %d times in 30 s at a 10 s interval, want 3", calls)
	}
}

func TestFollowStopsWithTheContextAndTheStepsError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	clk := clocktesting.NewFakeClock(time.Now())
	err := Follower{ErrOut: &bytes.Buffer{}, Clock: clk, Interval: time.Second}.Follow(ctx,
		func(context.Context) (string, bool, error) { cancel(); return "", false, nil })
	var ended *WaitEnded
	if !errors.As(err, &ended) || ended.Waited != "when waiting stopped" {
		t.Fatalf("got %v, want the wait stopped", err)
	}

	failed := errors.New("the restore failed: RestoreFailed")
	err = Follower{ErrOut: &bytes.Buffer{}, Clock: clk, Interval: time.Second}.Follow(context.Background(),
		func(context.Context) (string, bool, error) { return "RestoreJobSucceeded=False", false, failed })
	if !errors.Is(err, failed) {
		t.Fatalf("got %v, want the step's error", err)
	}
	if strings.Contains(err.Error(), "stopped waiting") {
		t.Fatalf("got %v, want the step's error alone", err)
	}
}
