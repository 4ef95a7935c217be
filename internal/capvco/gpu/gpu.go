// Package gpu keeps a machine's vGPU reservations: reserved and attached by their owner-encoding
// names (gpuname), released permanently (a reservation bills until then, attached or not,
// soft-deleted or not).
package gpu

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-logr/logr"

	"github.com/capx-io/capx/internal/vco"
)

// API is what this package calls.
type API interface {
	ListGPUProfiles(ctx context.Context, location string) ([]vco.GPUProfile, error)
	EnsureAttachedVGPU(ctx context.Context, location, cloudspaceID string, vmID int, profileID, name string) (vco.VGPU, bool, error)
	ListAllVGPUs(ctx context.Context, location string, opts vco.ListVGPUsOptions) ([]vco.VGPU, error)
	ReleaseVGPU(ctx context.Context, location, vgpuID string) error
}

// AttachedTo reports whether every id is attached to the VM, from the VM's devices (no call).
func AttachedTo(v vco.VM, ids []string) bool {
	for _, id := range ids {
		if id == "" || !slices.ContainsFunc(v.Devices, func(d vco.Device) bool { return d.ReferenceID == id }) {
			return false
		}
	}
	return true
}

// Ensure reserves and attaches one vGPU of the profile per name.
func Ensure(ctx context.Context, api API, location, cloudspaceID string, vmID int, profileID string, names []string) ([]vco.VGPU, error) {
	out := make([]vco.VGPU, 0, len(names))
	for _, n := range names {
		v, created, err := api.EnsureAttachedVGPU(ctx, location, cloudspaceID, vmID, profileID, n)
		if err != nil {
			return out, fmt.Errorf("vGPU %s: %w", n, err)
		}
		if created {
			logr.FromContextOrDiscard(ctx).Info("Reserved vGPU", "vgpu", v.Name, "vgpuID", v.ID, "profileID", profileID, "vmID", vmID, "location", location)
		}
		out = append(out, v)
	}
	return out, nil
}

// Release releases, permanently, every reservation in the location whose name owned accepts,
// including soft-deleted ones (still billed). It returns the names released.
func Release(ctx context.Context, api API, location string, owned func(name string) bool) ([]string, error) {
	all, err := api.ListAllVGPUs(ctx, location, vco.ListVGPUsOptions{IncludeDeleted: true})
	if err != nil {
		return nil, fmt.Errorf("list vGPUs in %s: %w", location, err)
	}
	var released []string
	var errs []error
	for _, v := range all {
		if !owned(v.Name) {
			continue
		}
		if err := api.ReleaseVGPU(ctx, location, v.ID); err != nil && !errors.Is(err, vco.ErrNotFound) {
			errs = append(errs, fmt.Errorf("release vGPU %s (%s): %w", v.Name, v.ID, err))
			continue
		}
		logr.FromContextOrDiscard(ctx).Info("Released vGPU permanently", "vgpu", v.Name, "vgpuID", v.ID, "location", location)
		released = append(released, v.Name)
	}
	return released, errors.Join(errs...)
}
