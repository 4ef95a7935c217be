// Package vm keeps a machine's VM: created once from the location's image with the bootstrap
// cloud-init, found again by id (or by name after an unknown outcome), reported when it
// disappears out of band rather than silently recreated, and deleted permanently.
package vm

import (
	"context"
	"errors"
	"fmt"
	"strings"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/vco"
)

// API is what this package calls.
type API interface {
	EnsureVM(ctx context.Context, cloudspaceID string, req vco.CreateVMRequest) (vco.VM, bool, error)
	FindVM(ctx context.Context, cloudspaceID, name string) (vco.VM, error)
	GetVM(ctx context.Context, cloudspaceID string, id int) (vco.VM, error)
	StopVM(ctx context.Context, cloudspaceID string, id int, force bool) error
	DeleteVM(ctx context.Context, cloudspaceID string, id int, opts vco.DeleteVMOptions) error
	FindImage(ctx context.Context, location, name string) (vco.Image, error)
}

// ErrLost is returned when the VM recorded for a machine no longer exists.
var ErrLost = errors.New("the VM no longer exists on the platform")

// Image resolves an image spec to its id in the location.
func Image(ctx context.Context, api API, location string, img capvcov1.ImageSpec) (int, error) {
	if img.ID != nil {
		return int(*img.ID), nil
	}
	found, err := api.FindImage(ctx, location, img.Name)
	if err != nil {
		return 0, fmt.Errorf("image %q in %s: %w", img.Name, location, err)
	}
	return found.ID, nil
}

// Get reads the VM knownID; ErrLost when it is gone.
func Get(ctx context.Context, api API, cloudspaceID string, knownID int) (vco.VM, error) {
	v, err := api.GetVM(ctx, cloudspaceID, knownID)
	if errors.Is(err, vco.ErrNotFound) || (err == nil && gone(v.Status)) {
		return vco.VM{}, fmt.Errorf("VM %d in cloudspace %s: %w", knownID, cloudspaceID, ErrLost)
	}
	return v, err
}

// Ensure finds the VM named req.Name or creates it.
func Ensure(ctx context.Context, api API, cloudspaceID string, req vco.CreateVMRequest) (vco.VM, error) {
	v, _, err := api.EnsureVM(ctx, cloudspaceID, req)
	if err != nil {
		return vco.VM{}, fmt.Errorf("ensure VM %s: %w", req.Name, err)
	}
	return v, nil
}

// Running reports whether the VM runs.
func Running(v vco.VM) bool { return strings.EqualFold(v.Status, "RUNNING") }

// Delete stops and deletes the VM (knownID, else the one named name) permanently, with its
// disks, detaching vGPUs so their reservations can be released. gone=true once it is gone.
func Delete(ctx context.Context, api API, cloudspaceID string, knownID int, name string) (bool, error) {
	id := knownID
	if id == 0 {
		v, err := api.FindVM(ctx, cloudspaceID, name)
		if errors.Is(err, vco.ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		id = v.ID
	}
	if err := api.StopVM(ctx, cloudspaceID, id, true); err != nil {
		if errors.Is(err, vco.ErrNotFound) {
			return true, nil
		}
		return false, fmt.Errorf("stop VM %d: %w", id, err)
	}
	err := api.DeleteVM(ctx, cloudspaceID, id, vco.DeleteVMOptions{Permanently: true, DetachGPU: true})
	if err == nil || errors.Is(err, vco.ErrNotFound) {
		return true, nil
	}
	return false, fmt.Errorf("delete VM %d: %w", id, err)
}

func gone(status string) bool {
	return strings.EqualFold(status, "DELETED") || strings.EqualFold(status, "DESTROYED")
}
