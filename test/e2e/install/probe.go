package install

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ProbeError is ProbeFromPod's error when httpget ran and exited non-zero.
type ProbeError struct {
	URL    string
	Pod    client.ObjectKey
	Exit   int32  // httpget: 1 for an answer other than 2xx, 2 when no answer came
	Output string // what httpget printed
}

func (e *ProbeError) Error() string {
	return fmt.Sprintf("httpget %s from pod %s exited %d: %s", e.URL, e.Pod, e.Exit, e.Output)
}

// NoAnswer reports that the URL did not answer at all (refused, timed out, not resolved).
func (e *ProbeError) NoAnswer() bool { return e.Exit == 2 }

// ProbeFromPodUntilAnswered is ProbeFromPod, repeated while the URL gives no answer at all, for up
// to timeout. Right after a Deployment becomes available its Service can still refuse
// connections for a moment (kube-proxy has not programmed the new endpoint yet); an answer of
// any status ends the wait and is returned as ProbeFromPod returns it. Every attempt adds an
// ephemeral container to the pod, so the attempts are spaced out (1 s, 2 s, 4 s, then 8 s).
func (m *Management) ProbeFromPodUntilAnswered(ctx context.Context, pod client.ObjectKey, image, url, bearer string, timeout time.Duration) (string, error) {
	return untilAnswered(ctx, timeout, func() (string, error) {
		return m.ProbeFromPod(ctx, pod, image, url, bearer)
	}, func(wait time.Duration, err error) {
		m.logf("no answer yet (%v); again in %s", err, wait)
	})
}

// untilAnswered runs probe until it returns anything but a no-answer ProbeError, or until
// timeout has passed since the first attempt (then the last result is returned).
func untilAnswered(ctx context.Context, timeout time.Duration, probe func() (string, error), retrying func(time.Duration, error)) (string, error) {
	deadline := time.Now().Add(timeout)
	wait := time.Second
	for {
		out, err := probe()
		var pe *ProbeError
		if !errors.As(err, &pe) || !pe.NoAnswer() || time.Now().Add(wait).After(deadline) {
			return out, err
		}
		if retrying != nil {
			retrying(wait, err)
		}
		select {
		case <-ctx.Done():
			return out, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 8*time.Second)
	}
}
