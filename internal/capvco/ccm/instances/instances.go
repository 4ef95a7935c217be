// Package instances answers the cloud node and node lifecycle controllers: which VM a Node is,
// what addresses, size and topology it has, whether it is shut down and whether it still
// exists. A Node is found by the provider ID CAPVCO sets on its VCOMachine (vco://<location>/<vm
// id>), else by name: CAPVCO names a VM, and its hostname, after the machine, and the kubelet
// registers under the hostname.
package instances

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/vco"
)

// API is what this package calls.
type API interface {
	GetVM(ctx context.Context, cloudspaceID string, id int) (vco.VM, error)
	ListVMs(ctx context.Context, cloudspaceID string, includeDeleted bool) ([]vco.VM, error)
	GetCloudspace(ctx context.Context, id string) (vco.Cloudspace, error)
}

// Site is one of the cluster's cloudspaces, resolved to its id.
type Site struct {
	Name         string
	Location     string
	CloudspaceID string
}

// Found is a Node's VM and the site it runs in.
type Found struct {
	VM   vco.VM
	Site Site
}

// ErrNotFound means the VM does not exist in any of the cluster's cloudspaces, and every one of
// them answered: only then may a Node be reported gone.
var ErrNotFound = fmt.Errorf("the VM is not in any of the cluster's cloudspaces: %w", cloudprovider.InstanceNotFound)

// Locate finds the VM of a Node: by spec.providerID when it is set, else by the Node's name.
func Locate(ctx context.Context, api API, sites []Site, node *corev1.Node) (Found, error) {
	if node.Spec.ProviderID != "" {
		return ByProviderID(ctx, api, sites, node.Spec.ProviderID)
	}
	return ByName(ctx, api, sites, node.Name)
}

// ByProviderID reads the VM a provider ID names, in the sites of its location. A provider ID of
// another form or location is an error, never "not found": a Node this CCM does not own must
// not be deleted by it.
func ByProviderID(ctx context.Context, api API, sites []Site, providerID string) (Found, error) {
	location, id, err := names.ParseProviderID(providerID)
	if err != nil {
		return Found{}, err
	}
	candidates := SitesIn(sites, location)
	if len(candidates) == 0 {
		return Found{}, fmt.Errorf("provider ID %s is in location %s, where this cluster has no site", providerID, location)
	}
	for _, s := range candidates {
		v, err := api.GetVM(ctx, s.CloudspaceID, id)
		if errors.Is(err, vco.ErrNotFound) || (err == nil && Gone(v)) {
			continue
		}
		if err != nil {
			return Found{}, fmt.Errorf("VM %d in cloudspace %s (site %s): %w", id, s.CloudspaceID, s.Name, err)
		}
		return Found{VM: v, Site: s}, nil
	}
	// A 404 for the VM may be a 404 for its cloudspace: a cloudspace that cannot be read means
	// the configuration or the credential is wrong, not that every VM is gone.
	for _, s := range candidates {
		if _, err := api.GetCloudspace(ctx, s.CloudspaceID); err != nil {
			return Found{}, fmt.Errorf("cloudspace %s of site %s: %w (refusing to report VM %d gone)", s.CloudspaceID, s.Name, err, id)
		}
	}
	return Found{}, fmt.Errorf("provider ID %s: %w", providerID, ErrNotFound)
}

// ByName finds the VM called name in every site; it is read again in full, since list answers
// leave out NIC types.
func ByName(ctx context.Context, api API, sites []Site, name string) (Found, error) {
	var found []Found
	for _, s := range sites {
		vms, err := api.ListVMs(ctx, s.CloudspaceID, false)
		if err != nil {
			return Found{}, fmt.Errorf("VMs of cloudspace %s (site %s): %w", s.CloudspaceID, s.Name, err)
		}
		for _, v := range vms {
			if v.Name == names.VM(name) && !Gone(v) {
				found = append(found, Found{VM: v, Site: s})
			}
		}
	}
	switch len(found) {
	case 0:
		return Found{}, fmt.Errorf("node %s: %w", name, ErrNotFound)
	case 1:
	default:
		var where []string
		for _, f := range found {
			where = append(where, fmt.Sprintf("VM %d in site %s", f.VM.ID, f.Site.Name))
		}
		return Found{}, fmt.Errorf("node %s: %d VMs carry its name (%s): set the Node's spec.providerID", name, len(found), strings.Join(where, ", "))
	}
	f := found[0]
	v, err := api.GetVM(ctx, f.Site.CloudspaceID, f.VM.ID)
	if err != nil {
		return Found{}, fmt.Errorf("VM %d in cloudspace %s: %w", f.VM.ID, f.Site.CloudspaceID, err)
	}
	f.VM = v
	return f, nil
}

// SitesIn lists the sites in a location (a geo cluster may have several in one).
func SitesIn(sites []Site, location string) []Site {
	var out []Site
	for _, s := range sites {
		if s.Location == location {
			out = append(out, s)
		}
	}
	return out
}

// Gone reports a VM in the recycle bin or destroyed: the platform still answers for it, but it
// no longer runs and never will again unless someone restores it.
func Gone(v vco.VM) bool {
	return strings.EqualFold(v.Status, "DELETED") || strings.EqualFold(v.Status, "DESTROYED")
}

// Shutdown reports a VM that is stopped but still exists: the node lifecycle controller then
// taints its Node instead of deleting it.
func Shutdown(v vco.VM) bool {
	return strings.EqualFold(v.Status, "HALTED") || strings.EqualFold(v.Status, "STOPPED")
}

// Metadata is what the cloud node controller writes on a Node.
func Metadata(f Found) *cloudprovider.InstanceMetadata {
	return &cloudprovider.InstanceMetadata{
		ProviderID:    names.ProviderID(f.Site.Location, f.VM.ID),
		InstanceType:  InstanceType(f.VM),
		NodeAddresses: Addresses(f.VM),
		Zone:          f.Site.Name,
		Region:        f.Site.Location,
	}
}

// InstanceType names the VM's size: the platform has no size names, only vCPUs and memory, so
// the type is those two, e.g. 4vcpu-8192mib. It is "" when the answer lacks them.
func InstanceType(v vco.VM) string {
	if v.VCPUs <= 0 || v.MemoryMiB <= 0 {
		return ""
	}
	return strconv.Itoa(v.VCPUs) + "vcpu-" + strconv.Itoa(v.MemoryMiB) + "mib"
}

// Addresses maps the VM's NICs: cloudspace-network NICs are internal, NICs on an external
// network are external, and the VM's hostname (else its name) is the host name. The
// cloudspace's own public address is not the node's: it is the router's, shared by every VM.
func Addresses(v vco.VM) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	add := func(t corev1.NodeAddressType, a string) {
		if a != "" && !slices.Contains(out, corev1.NodeAddress{Type: t, Address: a}) {
			out = append(out, corev1.NodeAddress{Type: t, Address: a})
		}
	}
	for _, n := range v.NICs {
		if strings.EqualFold(n.Type, "EXTERNAL") {
			add(corev1.NodeExternalIP, n.IP)
		} else {
			add(corev1.NodeInternalIP, n.IP)
		}
	}
	host := v.Hostname
	if host == "" {
		host = v.Name
	}
	add(corev1.NodeHostName, host)
	return out
}
