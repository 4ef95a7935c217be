package cmdutil

import (
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/utils/clock"
)

// Follower is the one `--wait` of every command: it asks a step for the progress until the step
// says the wait is over, prints each new progress line with its time on ErrOut, and gives up
// after Timeout by the clock, so a test steps a fake clock instead of sleeping.
type Follower struct {
	ErrOut   io.Writer
	Clock    clock.WithTicker
	Interval time.Duration
	// Timeout ends the wait with *WaitEnded; 0 waits until ctx ends.
	Timeout time.Duration
}

// Step reports where the change is: the progress line ("" prints nothing), whether the wait is
// over, and an error that ends it (the step's own verdict, such as "the restore failed").
type Step func(ctx context.Context) (progress string, done bool, err error)

// WaitEnded is the end of a wait that the change outlived: it goes on without the command.
type WaitEnded struct {
	// Waited says when the wait ended: "after 30m0s" or "when waiting stopped".
	Waited string
}

func (e *WaitEnded) Error() string { return "stopped waiting " + e.Waited }

// Follow runs step at once and then every Interval until it is done, fails, or the wait ends.
// The timeout also bounds ctx, so a request that hangs cannot outlast it.
func (f Follower) Follow(ctx context.Context, step Step) error {
	parent := ctx
	if f.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.Timeout)
		defer cancel()
	}
	clk := f.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	start := clk.Now()
	ticker := clk.NewTicker(f.Interval)
	defer ticker.Stop()
	var last string
	for {
		asked := clk.Now()
		progress, done, err := step(ctx)
		if progress != "" && progress != last {
			fmt.Fprintf(f.ErrOut, "%s  %s\n", asked.Format("15:04:05"), progress)
			last = progress
		}
		if done || err != nil {
			return err
		}
		if f.Timeout > 0 && clk.Since(start) >= f.Timeout {
			return &WaitEnded{Waited: "after " + f.Timeout.String()}
		}
		select {
		case <-ctx.Done():
			if parent.Err() == nil { // our own deadline
				return &WaitEnded{Waited: "after " + f.Timeout.String()}
			}
			return &WaitEnded{Waited: "when waiting stopped"}
		case <-ticker.C():
		}
	}
}
