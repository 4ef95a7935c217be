package vco

import (
	"context"
	"strings"
)

// External NICs are NICs of a VM on an external network, attached and detached while the VM
// runs. The attach answers only {success}: the new NIC, with its MAC and address, is found in
// the list afterwards.

const pathExternalNICs = pathVM + "/external-nics"

var (
	opListExternalNICs  = get("ListExternalNICs", pathExternalNICs)
	opAttachExternalNIC = post("AttachExternalNIC", pathExternalNICs)
	opGetExternalNIC    = get("GetExternalNIC", pathExternalNICs+"/{external_ip_address}")
	opDetachExternalNIC = del("DetachExternalNIC", pathExternalNICs+"/{external_ip_address}")
)

// ExternalNIC is a VM's NIC on an external network.
type ExternalNIC struct {
	DeviceName string `json:"device_name"`
	MAC        string `json:"mac_address"`
	IP         string `json:"ip_address"`
	NetworkID  int    `json:"network_id"`
	Type       string `json:"nic_type"`
	Model      string `json:"model"`
}

// AttachExternalNICRequest attaches a NIC on external network NetworkID; IP "" lets the
// platform pick a free address; Model "" is the platform's default.
type AttachExternalNICRequest struct {
	NetworkID int
	IP        string
	Model     string
}

// ListExternalNICs lists a VM's NICs on external networks.
func (c *Client) ListExternalNICs(ctx context.Context, cloudspaceID string, vmID int) ([]ExternalNIC, error) {
	var out resultList[ExternalNIC]
	err := c.do(ctx, opListExternalNICs, call{path: args(cloudspaceID, itoa(vmID))}, &out)
	return out.Result, err
}

// GetExternalNIC reads the VM's external NIC with address ip.
func (c *Client) GetExternalNIC(ctx context.Context, cloudspaceID string, vmID int, ip string) (ExternalNIC, error) {
	var out ExternalNIC
	err := c.do(ctx, opGetExternalNIC, call{path: args(cloudspaceID, itoa(vmID), ip)}, &out)
	return out, err
}

// AttachExternalNIC attaches a NIC to a running VM. Not idempotent: a lost answer leaves a
// NIC the caller must find by its address (pass IP to make that possible).
func (c *Client) AttachExternalNIC(ctx context.Context, cloudspaceID string, vmID int, req AttachExternalNICRequest) error {
	q := query{}.must("external_network_id", req.NetworkID).str("external_network_type", "external").
		str("external_network_ip", req.IP).str("model", strings.ToLower(req.Model))
	return c.do(ctx, opAttachExternalNIC, call{path: args(cloudspaceID, itoa(vmID)), query: q.values()}, nil)
}

// DetachExternalNIC detaches the VM's NIC with address ip on external network networkID.
func (c *Client) DetachExternalNIC(ctx context.Context, cloudspaceID string, vmID, networkID int, ip string) error {
	q := query{}.must("external_network_id", networkID).str("external_network_type", "external")
	return c.do(ctx, opDetachExternalNIC, call{path: args(cloudspaceID, itoa(vmID), ip), query: q.values()}, nil)
}
