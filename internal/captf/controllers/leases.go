package controllers

import (
	"context"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// acquireLeases takes the leases a Job of op needs before it is created; a non-empty wait says
// what it waits for. (Placeholder until internal/captf/leases lands: no serialisation yet.)
func (r *provider[T]) acquireLeases(_ context.Context, _ *pass[T], _ string, _ captfv1.Operation) (string, error) {
	return "", nil
}

// releaseLeases gives back the leases held by holder ("" releases all the object's leases).
func (r *provider[T]) releaseLeases(_ context.Context, _ *pass[T], _ string) error { return nil }
