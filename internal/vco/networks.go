package vco

import (
	"context"
	"encoding/json"
	"strings"
)

const (
	pathExternalNetworks = "/customers/{customer_id}/locations/{location}/external-networks"
	pathPublicIPs        = pathCloudspace + "/external-networks"
	pathPortForwards     = pathCloudspace + "/portforwards"
	pathPortForward      = pathPortForwards + "/{portforward_id}"
)

var (
	opListExternalNetworks = get("ListExternalNetworks", pathExternalNetworks)
	opGetExternalNetwork   = get("GetExternalNetwork", pathExternalNetworks+"/{external_network_id}")
	opListPublicIPs        = get("ListPublicIPs", pathPublicIPs)
	opAddPublicIP          = post("AddPublicIP", pathPublicIPs)
	opRemovePublicIP       = del("RemovePublicIP", pathPublicIPs)
	opListPortForwards     = get("ListPortForwards", pathPortForwards)
	opCreatePortForward    = post("CreatePortForward", pathPortForwards)
	opGetPortForward       = get("GetPortForward", pathPortForward)
	opDeletePortForward    = del("DeletePortForward", pathPortForward)
)

// ExternalNetwork is a network of a location that cloudspaces take public IPs from.
type ExternalNetwork struct {
	ID         int    `json:"external_network_id"`
	Name       string `json:"name"`
	Network    string `json:"network"`
	SubnetMask string `json:"subnet_mask"`
	Gateway    string `json:"gateway"`
	DHCP       bool   `json:"dhcp"`
	Public     bool   `json:"public"`
}

// ListExternalNetworks lists a location's external networks.
func (c *Client) ListExternalNetworks(ctx context.Context, location string) ([]ExternalNetwork, error) {
	var out resultList[ExternalNetwork]
	err := c.do(ctx, opListExternalNetworks, call{path: args(location)}, &out)
	return out.Result, err
}

// GetExternalNetwork reads one external network.
func (c *Client) GetExternalNetwork(ctx context.Context, location string, id int) (ExternalNetwork, error) {
	var out ExternalNetwork
	err := c.do(ctx, opGetExternalNetwork, call{path: args(location, itoa(id))}, &out)
	return out, err
}

// PublicIP is one external address of a cloudspace; the first is its primary IP.
type PublicIP struct {
	// NetworkID is a string because an uplink may be another cloudspace.
	NetworkID string `json:"-"`
	IP        string `json:"external_network_ip"`
	Type      string `json:"type"`
	Metric    int    `json:"metric"`
}

// UnmarshalJSON accepts external_network_id as a string (list) or an integer (add).
func (p *PublicIP) UnmarshalJSON(b []byte) error {
	type plain PublicIP
	var w struct {
		plain
		NetworkID flexString `json:"external_network_id"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = PublicIP(w.plain)
	p.NetworkID = string(w.NetworkID)
	return nil
}

// ListPublicIPs lists a cloudspace's external addresses.
func (c *Client) ListPublicIPs(ctx context.Context, cloudspaceID string) ([]PublicIP, error) {
	var out resultList[PublicIP]
	err := c.do(ctx, opListPublicIPs, call{path: args(cloudspaceID)}, &out)
	return out.Result, err
}

// AddPublicIP gives a cloudspace another address on an external network; ip "" lets the
// platform pick one.
func (c *Client) AddPublicIP(ctx context.Context, cloudspaceID string, networkID int, ip string) (PublicIP, error) {
	q := query{}.str("external_network_id", itoa(networkID)).str("external_network_type", "external").str("external_network_ip", ip)
	var out PublicIP
	err := c.do(ctx, opAddPublicIP, call{path: args(cloudspaceID), query: q.values()}, &out)
	return out, err
}

// RemovePublicIP releases an extra address of a cloudspace.
func (c *Client) RemovePublicIP(ctx context.Context, cloudspaceID string, networkID int, ip string) error {
	q := query{}.str("external_network_id", itoa(networkID)).str("external_network_ip", ip)
	return c.do(ctx, opRemovePublicIP, call{path: args(cloudspaceID), query: q.values()}, nil)
}

// PortForward maps a public port of a cloudspace to a VM.
type PortForward struct {
	ID             string `json:"portforward_id"`
	Protocol       string `json:"protocol"`
	PublicIP       string `json:"public_ip"`
	PublicPort     int    `json:"public_port"`
	TillPublicPort int    `json:"-"`
	LocalPort      int    `json:"local_port"`
	LocalIP        string `json:"local_ip"`
	VMID           int    `json:"-"`
}

// UnmarshalJSON reads the nullable integers.
func (p *PortForward) UnmarshalJSON(b []byte) error {
	type plain PortForward
	var w struct {
		plain
		Till flexInt `json:"till_public_port"`
		VMID flexInt `json:"vm_id"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = PortForward(w.plain)
	p.TillPublicPort, p.VMID = int(w.Till), int(w.VMID)
	return nil
}

// CreatePortForwardRequest forwards PublicPort (to TillPublicPort, for a range) on PublicIP
// ("" = the cloudspace's primary IP) to LocalPort of a VM.
type CreatePortForwardRequest struct {
	VMID           int
	Protocol       string // tcp, udp
	PublicIP       string
	PublicPort     int
	TillPublicPort int
	LocalPort      int
}

// CreatePortForward creates a forward; ErrConflict when the public port is taken.
func (c *Client) CreatePortForward(ctx context.Context, cloudspaceID string, req CreatePortForwardRequest) (string, error) {
	q := query{}.must("local_port", req.LocalPort).must("public_port", req.PublicPort).str("protocol", strings.ToLower(req.Protocol)).
		int("vm_id", req.VMID).str("public_ip", req.PublicIP).int("till_public_port", req.TillPublicPort)
	var out struct {
		ID string `json:"portforward_id"`
	}
	if err := c.do(ctx, opCreatePortForward, call{path: args(cloudspaceID), query: q.values()}, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// ListPortForwards lists a cloudspace's forwards.
func (c *Client) ListPortForwards(ctx context.Context, cloudspaceID string) ([]PortForward, error) {
	var out resultList[PortForward]
	err := c.do(ctx, opListPortForwards, call{path: args(cloudspaceID)}, &out)
	return out.Result, err
}

// GetPortForward reads one forward.
func (c *Client) GetPortForward(ctx context.Context, cloudspaceID, id string) (PortForward, error) {
	var out PortForward
	err := c.do(ctx, opGetPortForward, call{path: args(cloudspaceID, id)}, &out)
	return out, err
}

// DeletePortForward deletes a forward. (The API answers with the remaining forwards in an
// older model; they are not returned, call ListPortForwards.)
func (c *Client) DeletePortForward(ctx context.Context, cloudspaceID, id string) error {
	return c.do(ctx, opDeletePortForward, call{path: args(cloudspaceID, id)}, nil)
}
