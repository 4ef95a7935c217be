package install

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestUntilAnswered(t *testing.T) {
	noAnswer := &ProbeError{URL: "http://sim", Exit: 2, Output: "connection refused"}
	refused := &ProbeError{URL: "http://sim", Exit: 1, Output: "401 Unauthorized"}
	other := errors.New("add an ephemeral container: forbidden")

	cases := []struct {
		name     string
		results  []error // one per attempt; the last one repeats
		timeout  time.Duration
		attempts int
		want     error
	}{
		{"answered at once", []error{nil}, time.Minute, 1, nil},
		{"refused connections until the Service works", []error{noAnswer, noAnswer, nil}, time.Minute, 3, nil},
		{"an HTTP error is an answer: no retry", []error{refused}, time.Minute, 1, refused},
		{"other errors are not retried", []error{other}, time.Minute, 1, other},
		{"gives up after the timeout with the last error", []error{noAnswer}, 2 * time.Second, 2, noAnswer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			var waits []time.Duration
			_, err := untilAnswered(context.Background(), tc.timeout, func() (string, error) {
				err := tc.results[min(n, len(tc.results)-1)]
				n++
				return "", err
			}, func(d time.Duration, _ error) { waits = append(waits, d) })
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if n != tc.attempts {
				t.Fatalf("%d attempts, want %d (waits %v)", n, tc.attempts, waits)
			}
			for i := 1; i < len(waits); i++ {
				if waits[i] < waits[i-1] {
					t.Fatalf("waits shrink: %v", waits)
				}
			}
		})
	}
}

func TestUntilAnsweredStopsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := untilAnswered(ctx, time.Hour, func() (string, error) {
		n++
		cancel()
		return "", &ProbeError{Exit: 2}
	}, nil)
	if err == nil || n != 1 {
		t.Fatalf("after cancel: err %v, %d attempts; want the no-answer error after 1", err, n)
	}
}
