// Package vm keeps a machine's VM: created once from the location's image with the bootstrap
// cloud-init, found again by id (or by name after an unknown outcome), reported when it
// disappears out of band rather than silently recreated, and deleted permanently, from the
// recycle bin too.
package vm

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-logr/logr"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/vco"
)

// API is what this package calls.
type API interface {
	EnsureVMListed(ctx context.Context, cloudspaceID string, req vco.CreateVMRequest, list func(context.Context) ([]vco.VM, error)) (vco.VM, bool, error)
	ListVMs(ctx context.Context, cloudspaceID string, includeDeleted bool) ([]vco.VM, error)
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

// Read reads the VM knownID from the cloudspace's listing through listings under key, shared
// with the machines of key that read at the same time (the machines read in one resync window
// fall due together); ErrLost when the listing does not have it (the listing leaves out the
// recycle bin and destroyed VMs, as Get reports them lost) or the cloudspace is gone.
func Read(ctx context.Context, api API, listings *Listings, key, cloudspaceID string, knownID int) (vco.VM, error) {
	defer listings.Begin(key)()
	vms, err := listings.List(ctx, key, func(ctx context.Context) ([]vco.VM, error) { return api.ListVMs(ctx, cloudspaceID, false) })
	if err != nil && !errors.Is(err, vco.ErrNotFound) {
		return vco.VM{}, fmt.Errorf("list the VMs of cloudspace %s: %w", cloudspaceID, err)
	}
	for _, v := range vms {
		if v.ID == knownID && !gone(v.Status) {
			return v, nil
		}
	}
	return vco.VM{}, fmt.Errorf("VM %d in cloudspace %s: %w", knownID, cloudspaceID, ErrLost)
}

// Ensure finds the VM named req.Name or creates it. Its lookups by name read the cloudspace's
// listing through listings under key (the cloudspace and its credential), shared with the
// machines of key reconciled at the same time (one wave).
func Ensure(ctx context.Context, api API, listings *Listings, key, cloudspaceID string, req vco.CreateVMRequest) (vco.VM, error) {
	defer listings.Begin(key)()
	list := func(ctx context.Context) ([]vco.VM, error) {
		return listings.List(ctx, key, func(ctx context.Context) ([]vco.VM, error) { return api.ListVMs(ctx, cloudspaceID, false) })
	}
	v, created, err := api.EnsureVMListed(ctx, cloudspaceID, req, list)
	if err != nil {
		return vco.VM{}, fmt.Errorf("ensure VM %s: %w", req.Name, err)
	}
	if created {
		logr.FromContextOrDiscard(ctx).Info("Created VM", "vm", v.Name, "vmID", v.ID, "cloudspaceID", cloudspaceID)
	}
	return v, nil
}

// Running reports whether the VM runs.
func Running(v vco.VM) bool { return strings.EqualFold(v.Status, "RUNNING") }

// Delete stops and deletes the VM knownID permanently, with its disks, detaching vGPUs so
// their reservations can be released; without knownID, every VM named name (the machine's
// deterministic name: duplicates are its own, from creates of unknown outcome). gone=true
// once nothing is left.
//
// A VM in the recycle bin (a delete without permanently, by the platform's default, a person or
// a tool) is still billed and cannot be stopped: the platform refuses to stop a deleted VM, so
// it is deleted permanently without a stop. VMs are looked up in the list that includes the
// recycle bin, which the swagger documents (include_deleted), rather than read one by one.
func Delete(ctx context.Context, api API, cloudspaceID string, knownID int, name string) (bool, error) {
	targets, err := locate(ctx, api, cloudspaceID, knownID, name)
	if err != nil {
		return false, err
	}
	for _, v := range targets {
		if err := deleteOne(ctx, api, cloudspaceID, v); err != nil {
			return false, err
		}
	}
	return true, nil
}

func deleteOne(ctx context.Context, api API, cloudspaceID string, v vco.VM) error {
	switch {
	case strings.EqualFold(v.Status, "DESTROYED"):
		return nil
	case !inRecycleBin(v.Status):
		err := api.StopVM(ctx, cloudspaceID, v.ID, true)
		if errors.Is(err, vco.ErrNotFound) {
			return nil
		}
		if err != nil && !errors.Is(err, vco.ErrBadRequest) {
			return fmt.Errorf("stop VM %d: %w", v.ID, err)
		}
		if err != nil {
			// Deleted meanwhile? Then it is in the recycle bin and a permanent delete needs no
			// stop; otherwise the platform's refusal stands.
			again, lerr := locate(ctx, api, cloudspaceID, v.ID, "")
			switch {
			case lerr != nil:
				return fmt.Errorf("stop VM %d: %w", v.ID, err)
			case len(again) == 0:
				return nil
			case !inRecycleBin(again[0].Status):
				return fmt.Errorf("stop VM %d: %w", v.ID, err)
			}
		}
	}
	err := api.DeleteVM(ctx, cloudspaceID, v.ID, vco.DeleteVMOptions{Permanently: true, DetachGPU: true})
	if err == nil {
		logr.FromContextOrDiscard(ctx).Info("Deleted VM permanently", "vm", v.Name, "vmID", v.ID, "cloudspaceID", cloudspaceID,
			"fromRecycleBin", inRecycleBin(v.Status))
	}
	if err == nil || errors.Is(err, vco.ErrNotFound) {
		return nil
	}
	return fmt.Errorf("delete VM %d: %w", v.ID, err)
}

// locate lists the cloudspace's VMs, recycle bin included, and returns the VM knownID (when
// not 0) or every VM named name; none when the cloudspace is gone.
func locate(ctx context.Context, api API, cloudspaceID string, knownID int, name string) ([]vco.VM, error) {
	vms, err := api.ListVMs(ctx, cloudspaceID, true)
	if errors.Is(err, vco.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the VMs of cloudspace %s: %w", cloudspaceID, err)
	}
	var out []vco.VM
	for _, v := range vms {
		if (knownID != 0 && v.ID == knownID) || (knownID == 0 && v.Name == name) {
			out = append(out, v)
		}
	}
	return out, nil
}

func inRecycleBin(status string) bool { return strings.EqualFold(status, "DELETED") }

func gone(status string) bool {
	return strings.EqualFold(status, "DELETED") || strings.EqualFold(status, "DESTROYED")
}
