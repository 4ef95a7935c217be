// Package cloudspace keeps one site's cloudspace: found by its recorded id, or adopted by its
// deterministic name, or created; deleted permanently at teardown.
package cloudspace

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-logr/logr"

	"github.com/capx-io/capx/internal/vco"
)

// API is what this package calls.
type API interface {
	EnsureCloudspace(ctx context.Context, req vco.CreateCloudspaceRequest) (vco.Cloudspace, bool, error)
	FindCloudspace(ctx context.Context, location, name string) (vco.Cloudspace, error)
	GetCloudspace(ctx context.Context, id string) (vco.Cloudspace, error)
	DeleteCloudspace(ctx context.Context, id string, permanently bool) error
	ListVMs(ctx context.Context, cloudspaceID string, includeDeleted bool) ([]vco.VM, error)
}

// Observed is what Ensure found.
type Observed struct {
	Cloudspace vco.Cloudspace
	// Adopted: the cloudspace existed under its name and no status recorded it.
	Adopted bool
	// LiveVMs is how many VMs an adopted cloudspace already ran.
	LiveVMs int
	// Lost: status recorded an id the platform no longer has. It is not recreated: the VMs
	// that ran there are gone too, and a person has to decide.
	Lost bool
}

// Deployed reports whether the cloudspace is usable.
func (o Observed) Deployed() bool {
	return !o.Lost && strings.EqualFold(o.Cloudspace.Status, "DEPLOYED") && o.Cloudspace.ExternalNetworkIP != ""
}

// Ensure returns the cloudspace knownID names, or (no id known) the one called req.Name,
// creating it when absent.
func Ensure(ctx context.Context, api API, knownID string, req vco.CreateCloudspaceRequest) (Observed, error) {
	if knownID != "" {
		cs, err := api.GetCloudspace(ctx, knownID)
		switch {
		case errors.Is(err, vco.ErrNotFound), err == nil && gone(cs.Status):
			return Observed{Cloudspace: vco.Cloudspace{ID: knownID, Name: req.Name, Location: req.Location}, Lost: true}, nil
		case err != nil:
			return Observed{}, fmt.Errorf("read cloudspace %s: %w", knownID, err)
		}
		return Observed{Cloudspace: cs}, nil
	}
	cs, created, err := api.EnsureCloudspace(ctx, req)
	if err != nil {
		return Observed{}, fmt.Errorf("ensure cloudspace %s in %s: %w", req.Name, req.Location, err)
	}
	o := Observed{Cloudspace: cs, Adopted: !created}
	log := logr.FromContextOrDiscard(ctx).WithValues("cloudspace", cs.Name, "cloudspaceID", cs.ID, "location", req.Location)
	if created {
		log.Info("Created cloudspace")
	}
	if o.Adopted {
		vms, err := api.ListVMs(ctx, cs.ID, false)
		if err != nil {
			return Observed{}, fmt.Errorf("list the VMs of adopted cloudspace %s: %w", cs.ID, err)
		}
		o.LiveVMs = len(vms)
		log.Info("Found the cloudspace by name, not in status: adopting it", "liveVMs", o.LiveVMs)
	}
	return o, nil
}

// Delete deletes the cloudspace named name in location (or with id knownID) permanently.
// gone=true once it no longer exists.
func Delete(ctx context.Context, api API, knownID, location, name string) (bool, error) {
	id := knownID
	if id == "" {
		cs, err := api.FindCloudspace(ctx, location, name)
		if errors.Is(err, vco.ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		id = cs.ID
	}
	err := api.DeleteCloudspace(ctx, id, true)
	if err == nil {
		logr.FromContextOrDiscard(ctx).Info("Deleted cloudspace permanently", "cloudspace", name, "cloudspaceID", id, "location", location)
	}
	if err == nil || errors.Is(err, vco.ErrNotFound) {
		return true, nil
	}
	return false, fmt.Errorf("delete cloudspace %s: %w", id, err)
}

func gone(status string) bool {
	return strings.EqualFold(status, "DELETED") || strings.EqualFold(status, "DESTROYED")
}
