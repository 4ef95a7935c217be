package controllers_test

import (
	"syscall"
	"testing"
	"time"
)

// fleetTimeout is a fleet benchmark's wait for n machines: per500 for up to 500, in proportion
// above, so CAPX_BENCH_MACHINES=5000 is not cut off by a bound chosen for 500.
func fleetTimeout(n int, per500 time.Duration) time.Duration {
	return per500 * time.Duration(max(n, 500)) / 500
}

// waitFleet polls measure until it reaches want and returns how long that took. On timeout it
// fails with the figure it measured last, so a run that does not finish still says how far it
// got.
func waitFleet(b *testing.B, what string, n int, timeout, every time.Duration, want int, measure func() int) time.Duration {
	b.Helper()
	start := time.Now()
	last := -1
	for {
		if last = measure(); last >= want {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			b.Fatalf("%s: %d of %d after %s (timeout %s for %d machines)", what, last, want, time.Since(start).Round(time.Second), timeout, n)
		}
		time.Sleep(every)
	}
}

// processCPU is the CPU time this process (the manager runs in it) has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
