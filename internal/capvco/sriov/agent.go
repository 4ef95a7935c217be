package sriov

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"

	"github.com/go-logr/logr"

	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/vco"
)

// API is the part of the whitesky.cloud client the agent uses.
type API interface {
	GetVM(ctx context.Context, cloudspaceID string, id int) (vco.VM, error)
	ListExternalNICs(ctx context.Context, cloudspaceID string, vmID int) ([]vco.ExternalNIC, error)
	AttachExternalNIC(ctx context.Context, cloudspaceID string, vmID int, req vco.AttachExternalNICRequest) error
	DetachExternalNIC(ctx context.Context, cloudspaceID string, vmID, networkID int, ip string) error
}

// Agent attaches and detaches its node's NICs.
type Agent struct {
	API API
	// Location, Cloudspace and VMID are the node's VM (Locate finds them).
	Location   string
	Cloudspace string
	VMID       int
	// Networks are the external networks a Pod may ask for; empty allows any of the location's.
	Networks []int
	Store    Store
	Log      logr.Logger

	// mu makes one attach at a time: the new NIC is the one that appears in the VM's list
	// across the attach, which only holds while no other attach of this agent runs.
	mu sync.Mutex
}

// Locate finds the node's VM from its provider ID among the cluster's cloudspaces.
func Locate(ctx context.Context, api API, providerID string, cloudspaces []string) (location, cloudspace string, vmID int, err error) {
	location, vmID, err = names.ParseProviderID(providerID)
	if err != nil {
		return "", "", 0, err
	}
	var misses []error
	for _, cs := range cloudspaces {
		_, err := api.GetVM(ctx, cs, vmID)
		if err == nil {
			return location, cs, vmID, nil
		}
		// A credential scoped to some of the cluster's cloudspaces is refused on the others.
		if !errors.Is(err, vco.ErrNotFound) && !errors.Is(err, vco.ErrForbidden) {
			return "", "", 0, fmt.Errorf("look for VM %d in cloudspace %s: %w", vmID, cs, err)
		}
		misses = append(misses, err)
	}
	return "", "", 0, fmt.Errorf("VM %d (%s) is in none of the cloudspaces %v the credential can read: %w", vmID, providerID, cloudspaces, errors.Join(misses...))
}

// Attach attaches a NIC for a container's interface, or returns the one attached already (a
// CNI ADD may be repeated).
func (a *Agent) Attach(ctx context.Context, req AttachRequest) (*Attachment, error) {
	if req.ContainerID == "" || req.IfName == "" {
		return nil, errors.New("containerID and ifName are required")
	}
	if len(a.Networks) > 0 && !slices.Contains(a.Networks, req.NetworkID) {
		return nil, fmt.Errorf("external network %d is not one this agent attaches (allowed: %v)", req.NetworkID, a.Networks)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if have, err := a.Store.Get(req.Key()); err != nil || have != nil {
		return have, err
	}
	before, err := a.API.ListExternalNICs(ctx, a.Cloudspace, a.VMID)
	if err != nil {
		return nil, fmt.Errorf("list the VM's NICs: %w", err)
	}
	attachErr := a.API.AttachExternalNIC(ctx, a.Cloudspace, a.VMID, vco.AttachExternalNICRequest{NetworkID: req.NetworkID, Model: req.Model})
	after, err := a.API.ListExternalNICs(ctx, a.Cloudspace, a.VMID)
	if err != nil {
		return nil, errors.Join(attachErr, fmt.Errorf("list the VM's NICs after the attach: %w", err))
	}
	nic, err := newNIC(before, after, req.NetworkID)
	if err != nil {
		// An attach whose answer was lost may still have happened: only a NIC that appeared
		// counts, whatever the answer said.
		return nil, errors.Join(attachErr, err)
	}
	att := Attachment{AttachmentKey: req.Key(), MAC: nic.MAC, IP: nic.IP, NetworkID: req.NetworkID}
	if err := a.Store.Put(att); err != nil {
		// Unrecorded, the NIC would outlive the Pod: detach it again.
		return nil, errors.Join(fmt.Errorf("record the attachment: %w", err), a.API.DetachExternalNIC(ctx, a.Cloudspace, a.VMID, req.NetworkID, nic.IP))
	}
	a.Log.Info("NIC attached", "container", req.ContainerID, "ifName", req.IfName, "mac", nic.MAC, "ip", nic.IP, "network", req.NetworkID)
	return &att, nil
}

// newNIC is the one NIC on the network that the attach added, told apart by its MAC.
func newNIC(before, after []vco.ExternalNIC, networkID int) (vco.ExternalNIC, error) {
	var added []vco.ExternalNIC
	for _, n := range after {
		if n.NetworkID == networkID && !slices.ContainsFunc(before, func(b vco.ExternalNIC) bool { return normalMAC(b.MAC) == normalMAC(n.MAC) }) {
			added = append(added, n)
		}
	}
	switch len(added) {
	case 1:
		if _, err := net.ParseMAC(added[0].MAC); err != nil {
			return vco.ExternalNIC{}, fmt.Errorf("the new NIC's MAC %q: %w", added[0].MAC, err)
		}
		return added[0], nil
	case 0:
		return vco.ExternalNIC{}, fmt.Errorf("no new NIC on external network %d appeared in the VM's list", networkID)
	}
	return vco.ExternalNIC{}, fmt.Errorf("%d NICs on external network %d appeared at once (something else attaches NICs to this VM): %v", len(added), networkID, added)
}

func normalMAC(m string) string {
	hw, err := net.ParseMAC(m)
	if err != nil {
		return m
	}
	return hw.String()
}

// Get returns a container interface's attachment, or nil.
func (a *Agent) Get(k AttachmentKey) (*Attachment, error) { return a.Store.Get(k) }

// Detach detaches a container interface's NIC and forgets it; detaching what is not attached
// is done (a CNI DEL may be repeated).
func (a *Agent) Detach(ctx context.Context, k AttachmentKey) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	att, err := a.Store.Get(k)
	if err != nil || att == nil {
		return err
	}
	err = a.API.DetachExternalNIC(ctx, a.Cloudspace, a.VMID, att.NetworkID, att.IP)
	if err != nil && !errors.Is(err, vco.ErrNotFound) {
		return fmt.Errorf("detach NIC %s (%s): %w", att.MAC, att.IP, err)
	}
	a.Log.Info("NIC detached", "container", k.ContainerID, "ifName", k.IfName, "mac", att.MAC, "ip", att.IP)
	return a.Store.Delete(k)
}
