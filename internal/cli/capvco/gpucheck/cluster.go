package gpucheck

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cluster is the management cluster's reader, every call of it bounded by --cluster-timeout
// and the run's deadline.
func (o *Options) cluster(ctx context.Context) (client.Reader, error) {
	r := boundedReader{timeout: o.ClusterTimeout}
	var c client.WithWatch
	err := r.call(ctx, func(context.Context) error {
		var err error
		c, err = o.Client()
		return err
	})
	if err != nil {
		return nil, err
	}
	r.r = c
	return r, nil
}

// boundedReader returns at its deadline even when the call underneath does not: the REST
// mapper's discovery, which the first List of a kind makes, takes no context, so an API
// server that accepts the connection and never answers held the check for as long as the
// socket lived. An abandoned call ends with the process.
type boundedReader struct {
	r       client.Reader
	timeout time.Duration
}

func (b boundedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return b.call(ctx, func(ctx context.Context) error { return b.r.Get(ctx, key, obj, opts...) })
}

func (b boundedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return b.call(ctx, func(ctx context.Context) error { return b.r.List(ctx, list, opts...) })
}

// call runs f and waits for it until ctx is done or the timeout passed, whichever is first.
// The caller must not read what f writes after call returned an error.
func (b boundedReader) call(ctx context.Context, f func(context.Context) error) error {
	if b.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, b.timeout, fmt.Errorf("the management cluster did not answer within %s (--cluster-timeout)", b.timeout))
		defer cancel()
	}
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("%w: %v", context.Cause(ctx), err)
		}
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// errRunTimedOut is the cause of a run's context when --timeout ran out.
type errRunTimedOut struct{ timeout time.Duration }

func (e errRunTimedOut) Error() string { return fmt.Sprintf("--timeout %s ran out", e.timeout) }

// bound gives a run its deadline: --timeout after start, plus the time a question waited
// for its answer.
func (o *Options) bound(ctx context.Context, start time.Time, waited time.Duration) (context.Context, context.CancelFunc) {
	if o.Timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithDeadlineCause(ctx, start.Add(o.Timeout+waited), errRunTimedOut{o.Timeout})
}

// timedOut adds, to the error of a run whose deadline passed, what ran out and what to do.
func timedOut(ctx context.Context, err error) error {
	var e errRunTimedOut
	if err == nil || !errors.As(context.Cause(ctx), &e) {
		return err
	}
	return fmt.Errorf("%w\n%s before the run finished (raise --timeout for a large account or a slow API; "+
		"--api-timeout and --cluster-timeout bound each call)", err, e)
}
