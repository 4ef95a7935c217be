package vco

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

const (
	pathCloudspaces = "/customers/{customer_id}/cloudspaces"
	pathCloudspace  = pathCloudspaces + "/{cloudspace_id}"
)

var (
	opListCloudspaces  = get("ListCloudspaces", pathCloudspaces)
	opCreateCloudspace = post("CreateCloudspace", pathCloudspaces)
	opGetCloudspace    = get("GetCloudspace", pathCloudspace)
	opDeleteCloudspace = del("DeleteCloudspace", pathCloudspace)
)

// Cloudspace is an isolated network behind a virtual router, in one location.
type Cloudspace struct {
	ID                string `json:"cloudspace_id"`
	Name              string `json:"name"`
	Status            string `json:"status"` // DEPLOYING, DEPLOYED, DISABLED, DELETED, ...
	Location          string `json:"location"`
	ExternalNetworkIP string `json:"external_network_ip"` // the primary public IP; "" when private
	PrivateNetwork    string `json:"private_network"`
	LocalDomain       string `json:"local_domain"`
	Mode              string `json:"cloudspace_mode"`
	CreationTime      int64  `json:"creation_time"`
	UpdateTime        int64  `json:"update_time"`
	// ExternalNetworkID is set by GetCloudspace: a network id, or the parent cloudspace id
	// of a nested cloudspace.
	ExternalNetworkID string `json:"-"`
	// Uplinks is set by ListCloudspaces.
	Uplinks []CloudspaceUplink `json:"-"`
}

// CloudspaceUplink is one external network of a cloudspace in a list answer.
type CloudspaceUplink struct {
	NetworkID int    `json:"id"`
	IP        string `json:"ip"`
	Type      string `json:"type"`
	Metric    int    `json:"metric"`
}

// UnmarshalJSON accepts both shapes of external_networks: the flat array the API sends and
// the array of arrays the swagger declares.
func (c *Cloudspace) UnmarshalJSON(b []byte) error {
	type plain Cloudspace
	var w struct {
		plain
		ExternalNetworkID flexString      `json:"external_network_id"`
		Uplinks           json.RawMessage `json:"external_networks"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*c = Cloudspace(w.plain)
	c.ExternalNetworkID = string(w.ExternalNetworkID)
	if len(w.Uplinks) == 0 || string(w.Uplinks) == "null" {
		return nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(w.Uplinks, &raw); err != nil {
		return fmt.Errorf("external_networks: %w", err)
	}
	for _, item := range raw {
		if strings.HasPrefix(strings.TrimSpace(string(item)), "[") {
			var inner []CloudspaceUplink
			if err := json.Unmarshal(item, &inner); err != nil {
				return fmt.Errorf("external_networks: %w", err)
			}
			c.Uplinks = append(c.Uplinks, inner...)
			continue
		}
		var u CloudspaceUplink
		if err := json.Unmarshal(item, &u); err != nil {
			return fmt.Errorf("external_networks: %w", err)
		}
		c.Uplinks = append(c.Uplinks, u)
	}
	return nil
}

// CreateCloudspaceRequest creates a public cloudspace unless Private or ParentCloudspaceID.
type CreateCloudspaceRequest struct {
	Name     string
	Location string
	// PrivateNetwork defaults to 192.168.103.0/24 on the platform.
	PrivateNetwork string
	LocalDomain    string
	Private        bool
	// ExternalNetworkID picks the uplink network; nil means the location's default.
	ExternalNetworkID  *int
	ParentCloudspaceID string
	// Quotas; nil leaves them unlimited.
	VCPUQuota, MemoryQuotaGiB, DiskQuotaGiB, PublicIPQuota *int
}

type wireFirewall struct {
	Private           bool   `json:"private"`
	ExternalNetworkID *int   `json:"external_network_id,omitempty"`
	ParentCloudspace  string `json:"parent_cloudspace_id,omitempty"`
}

type wireCreateCloudspace struct {
	Name            string       `json:"name"`
	Location        string       `json:"location"`
	PrivateNetwork  string       `json:"private_network,omitempty"`
	LocalDomain     string       `json:"local_domain,omitempty"`
	VCPUQuota       *int         `json:"vcpu_quota,omitempty"`
	MemoryQuota     *int         `json:"memory_quota,omitempty"`
	VDiskSpaceQuota *int         `json:"vdisk_space_quota,omitempty"`
	PublicIPQuota   *int         `json:"public_ip_quota,omitempty"`
	Firewall        wireFirewall `json:"firewall"`
}

// CreateCloudspace creates a cloudspace and returns its id. The call blocks until it is
// deployed. The API has no idempotency key: prefer EnsureCloudspace.
func (c *Client) CreateCloudspace(ctx context.Context, req CreateCloudspaceRequest) (string, error) {
	if req.Name == "" || req.Location == "" {
		return "", fmt.Errorf("vco: CreateCloudspace: name and location are required: %w", ErrBadRequest)
	}
	body := wireCreateCloudspace{
		Name: req.Name, Location: req.Location, PrivateNetwork: req.PrivateNetwork, LocalDomain: req.LocalDomain,
		VCPUQuota: req.VCPUQuota, MemoryQuota: req.MemoryQuotaGiB, VDiskSpaceQuota: req.DiskQuotaGiB, PublicIPQuota: req.PublicIPQuota,
		Firewall: wireFirewall{Private: req.Private, ExternalNetworkID: req.ExternalNetworkID, ParentCloudspace: req.ParentCloudspaceID},
	}
	var out struct {
		ID string `json:"cloudspace_id"`
	}
	if err := c.do(ctx, opCreateCloudspace, call{body: body}, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// GetCloudspace reads one cloudspace.
func (c *Client) GetCloudspace(ctx context.Context, id string) (Cloudspace, error) {
	var out Cloudspace
	err := c.do(ctx, opGetCloudspace, call{path: args(id)}, &out)
	return out, err
}

// ListCloudspacesOptions filter a cloudspace list.
type ListCloudspacesOptions struct {
	Locations      []string
	IncludeDeleted bool
}

// PartialListError is returned, together with the items that did arrive, when a
// cross-location list could not reach some locations. A name lookup must not conclude
// "absent" from a partial list.
type PartialListError struct {
	Failed map[string]string // location -> status text
}

func (e *PartialListError) Error() string {
	locs := make([]string, 0, len(e.Failed))
	for l, s := range e.Failed {
		locs = append(locs, l+": "+s)
	}
	sort.Strings(locs)
	return "vco: incomplete list, locations did not answer: " + strings.Join(locs, "; ")
}

// Unwrap makes a partial list transient: asking again later may succeed.
func (e *PartialListError) Unwrap() error { return ErrUnavailable }

// ListCloudspaces lists the customer's cloudspaces (those the credential may read). When a
// location fails, the others' cloudspaces come back with a *PartialListError.
func (c *Client) ListCloudspaces(ctx context.Context, opts ListCloudspacesOptions) ([]Cloudspace, error) {
	q := query{}
	if len(opts.Locations) > 0 {
		q.str("locations", strings.Join(opts.Locations, ","))
	}
	if opts.IncludeDeleted {
		q.bool("include_deleted", true)
	}
	var out struct {
		Locations []struct {
			Location string `json:"location"`
			Status   string `json:"status"`
		} `json:"locations"`
		Result []Cloudspace `json:"result"`
	}
	if err := c.do(ctx, opListCloudspaces, call{query: q.values()}, &out); err != nil {
		return nil, err
	}
	var partial *PartialListError
	for _, l := range out.Locations {
		if !strings.EqualFold(l.Status, "OK") {
			if partial == nil {
				partial = &PartialListError{Failed: map[string]string{}}
			}
			partial.Failed[l.Location] = l.Status
		}
	}
	if partial != nil {
		return out.Result, partial
	}
	return out.Result, nil
}

// DeleteCloudspace deletes a cloudspace; without permanently it goes to the recycle bin.
// The platform refuses (409) while the cloudspace still holds VMs.
func (c *Client) DeleteCloudspace(ctx context.Context, id string, permanently bool) error {
	return c.do(ctx, opDeleteCloudspace, call{path: args(id), query: query{}.bool("permanently", permanently).values()}, nil)
}
