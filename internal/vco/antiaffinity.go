package vco

import "context"

const (
	pathGroups = pathCloudspace + "/anti-affinity-groups"
	pathGroup  = pathGroups + "/{group_id}"
)

var (
	opListGroups    = get("ListAntiAffinityGroups", pathGroups)
	opCreateGroup   = post("CreateAntiAffinityGroup", pathGroups)
	opGetGroup      = get("GetAntiAffinityGroup", pathGroup)
	opDeleteGroup   = del("DeleteAntiAffinityGroup", pathGroup)
	opUpdateGroup   = put("UpdateAntiAffinityGroup", pathGroup)
	opListGroupVMs  = get("ListAntiAffinityGroupVMs", pathGroup+"/vms")
	opAddGroupVM    = post("AddAntiAffinityGroupVM", pathGroup+"/vms")
	opRemoveGroupVM = del("RemoveAntiAffinityGroupVM", pathGroup+"/vms/{vm_id}")
)

// AntiAffinityGroup spreads its VMs over hosts. The caller picks the id.
type AntiAffinityGroup struct {
	ID     string `json:"group_id"`
	Spread int    `json:"spread"` // -1 = infinite
	Status string `json:"status"` // INCOMPLETE while empty
}

// GroupVM is a member of a group.
type GroupVM struct {
	VMID   int    `json:"vm_id"`
	Status string `json:"status"`
}

// ListAntiAffinityGroups lists a cloudspace's groups.
func (c *Client) ListAntiAffinityGroups(ctx context.Context, cloudspaceID string) ([]AntiAffinityGroup, error) {
	var out resultList[AntiAffinityGroup]
	err := c.do(ctx, opListGroups, call{path: args(cloudspaceID)}, &out)
	return out.Result, err
}

// CreateAntiAffinityGroup creates a group with the caller's id; ErrConflict when it exists,
// which makes create-by-id idempotent for callers that treat that as success.
func (c *Client) CreateAntiAffinityGroup(ctx context.Context, cloudspaceID, id string, spread int) error {
	q := query{}.str("group_id", id).must("spread", spread)
	return c.do(ctx, opCreateGroup, call{path: args(cloudspaceID), query: q.values()}, nil)
}

// GetAntiAffinityGroup reads a group.
func (c *Client) GetAntiAffinityGroup(ctx context.Context, cloudspaceID, id string) (AntiAffinityGroup, error) {
	var out AntiAffinityGroup
	err := c.do(ctx, opGetGroup, call{path: args(cloudspaceID, id)}, &out)
	return out, err
}

// UpdateAntiAffinityGroup changes a group's spread.
func (c *Client) UpdateAntiAffinityGroup(ctx context.Context, cloudspaceID, id string, spread int) error {
	return c.do(ctx, opUpdateGroup, call{path: args(cloudspaceID, id), query: query{}.must("spread", spread).values()}, nil)
}

// DeleteAntiAffinityGroup deletes a group.
func (c *Client) DeleteAntiAffinityGroup(ctx context.Context, cloudspaceID, id string) error {
	return c.do(ctx, opDeleteGroup, call{path: args(cloudspaceID, id)}, nil)
}

// ListAntiAffinityGroupVMs lists a group's members (the API's key is "vms", not "result").
func (c *Client) ListAntiAffinityGroupVMs(ctx context.Context, cloudspaceID, id string) ([]GroupVM, error) {
	var out struct {
		VMs []GroupVM `json:"vms"`
	}
	err := c.do(ctx, opListGroupVMs, call{path: args(cloudspaceID, id)}, &out)
	return out.VMs, err
}

// AddAntiAffinityGroupVM adds a VM to a group.
func (c *Client) AddAntiAffinityGroupVM(ctx context.Context, cloudspaceID, id string, vmID int) error {
	return c.do(ctx, opAddGroupVM, call{path: args(cloudspaceID, id), query: query{}.must("vm_id", vmID).values()}, nil)
}

// RemoveAntiAffinityGroupVM removes a VM from a group.
func (c *Client) RemoveAntiAffinityGroupVM(ctx context.Context, cloudspaceID, id string, vmID int) error {
	return c.do(ctx, opRemoveGroupVM, call{path: args(cloudspaceID, id, itoa(vmID))}, nil)
}
