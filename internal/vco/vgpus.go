package vco

import "context"

// A vGPU reservation is billed from the moment it is reserved until it is released
// permanently: detaching does not stop the charge, and a plain delete only moves it to the
// recycle bin. It has no owner field, so CAPVCO names reservations
// capvco_<namespace>_<cluster>_<machine>_gpu_<n> and recognises its own by name.

const (
	pathGPUProfiles = "/customers/{customer_id}/locations/{location}/gpus"
	pathVGPUs       = "/customers/{customer_id}/locations/{location}/vgpus"
)

var (
	opListGPUProfiles      = get("ListGPUProfiles", pathGPUProfiles)
	opReserveVGPU          = post("ReserveVGPU", pathGPUProfiles+"/{gpu_id}")
	opReserveAndAttachVGPU = post("ReserveAndAttachVGPU", pathVM+"/gpus/{gpu_id}")
	opListVGPUs            = get("ListVGPUs", pathVGPUs)
	opReleaseVGPU          = del("ReleaseVGPU", pathVGPUs+"/{vgpu_id}")
	opRestoreVGPU          = post("RestoreVGPU", pathVGPUs+"/{vgpu_id}")
	opAttachVGPU           = post("AttachVGPU", pathVM+"/vgpus/{vgpu_id}")
	opDetachVGPU           = del("DetachVGPU", pathVM+"/vgpus/{vgpu_id}")
)

// GPUProfile is a vGPU type offered in a location.
type GPUProfile struct {
	ID                 string `json:"id"`
	Vendor             string `json:"vendor"`
	Model              string `json:"model"`
	Description        string `json:"description"`
	AvailableInstances int    `json:"available_instances"`
}

// VGPU is a reservation.
type VGPU struct {
	ID           string `json:"vgpu_id"`
	Name         string `json:"vgpu_name"`
	ProfileID    string `json:"gpu_id"`
	Description  string `json:"description"`
	Status       string `json:"status"`
	Location     string `json:"location"`
	CustomerID   string `json:"customer_id"`
	DeletionTime *int64 `json:"deletion_time"`
	// VM is the VM it is attached to; nil (or id 0) when unattached.
	VM *VGPUVM `json:"virtual_machine"`
}

// VGPUVM identifies the VM a vGPU is attached to.
type VGPUVM struct {
	ID             int    `json:"id"`
	Name           string `json:"name"`
	CloudspaceID   string `json:"cloudspace_id"`
	CloudspaceName string `json:"cloudspace_name"`
}

// Attached says whether the reservation is assigned to a VM. The platform's shape for an
// unattached one is not documented: null and {"id": 0} both mean no.
func (v VGPU) Attached() bool { return v.VM != nil && v.VM.ID != 0 }

// ListGPUProfiles lists a location's vGPU profiles.
func (c *Client) ListGPUProfiles(ctx context.Context, location string) ([]GPUProfile, error) {
	var out resultList[GPUProfile]
	err := c.do(ctx, opListGPUProfiles, call{path: args(location)}, &out)
	return out.Result, err
}

type vgpuName struct {
	Name string `json:"vgpu_name"`
}

type vgpuID struct {
	ID string `json:"vgpu_id"`
}

// ReserveVGPU reserves an unattached vGPU; billing starts now.
func (c *Client) ReserveVGPU(ctx context.Context, location, profileID, name string) (string, error) {
	var out vgpuID
	err := c.do(ctx, opReserveVGPU, call{path: args(location, profileID), body: vgpuName{name}}, &out)
	return out.ID, err
}

// ReserveAndAttachVGPU reserves a vGPU and attaches it to a VM in one call.
func (c *Client) ReserveAndAttachVGPU(ctx context.Context, cloudspaceID string, vmID int, profileID, name string) (string, error) {
	var out vgpuID
	err := c.do(ctx, opReserveAndAttachVGPU, call{path: args(cloudspaceID, itoa(vmID), profileID), body: vgpuName{name}}, &out)
	return out.ID, err
}

// ListVGPUsOptions page through reservations: Limit (API default 25, 0 = all) and
// StartAfter, an offset.
type ListVGPUsOptions struct {
	Limit          int
	StartAfter     int
	IncludeDeleted bool
	OnlyDeleted    bool
}

// VGPUPage is one page of reservations.
type VGPUPage struct {
	Items []VGPU `json:"data"`
	// Count is the total number of matching reservations; Pages = ceil(Count/Limit).
	Count int `json:"-"`
	Pages int `json:"-"`
	Limit int `json:"-"`
}

// ListVGPUs reads one page.
func (c *Client) ListVGPUs(ctx context.Context, location string, opts ListVGPUsOptions) (VGPUPage, error) {
	q := query{}.must("limit", opts.Limit).must("start_after", opts.StartAfter)
	if opts.IncludeDeleted {
		q.bool("include_deleted", true)
	}
	if opts.OnlyDeleted {
		q.bool("only_deleted", true)
	}
	var out vgpuPage
	if err := c.do(ctx, opListVGPUs, call{path: args(location), query: q.values()}, &out); err != nil {
		return VGPUPage{}, err
	}
	return out.page(), nil
}

// vgpuPage is the list call's answer.
type vgpuPage struct {
	Pagination struct {
		Limit int `json:"limit"`
		Pages int `json:"pages"`
		Count int `json:"count"`
	} `json:"pagination"`
	Data []VGPU `json:"data"`
}

func (p vgpuPage) page() VGPUPage {
	return VGPUPage{Items: p.Data, Count: p.Pagination.Count, Pages: p.Pagination.Pages, Limit: p.Pagination.Limit}
}

// DefaultVGPUPageSize is the page size ListAllVGPUs uses when none is given.
const DefaultVGPUPageSize = 500

// maxVGPUPages stops a paging loop that a misbehaving server keeps feeding.
const maxVGPUPages = 100000

// ListAllVGPUs reads every reservation of a location (opts' filters; Limit is the page size,
// StartAfter is ignored) through VGPUListing, so a list that other teams change while it is
// read is still read whole, or the error says it could not be.
func (c *Client) ListAllVGPUs(ctx context.Context, location string, opts ListVGPUsOptions) ([]VGPU, error) {
	return VGPUListing{Limit: opts.Limit}.Read(ctx, func(ctx context.Context, start, limit int) (VGPUPage, error) {
		o := opts
		o.StartAfter, o.Limit = start, limit
		return c.ListVGPUs(ctx, location, o)
	})
}

// FindVGPUs returns the reservations of a location with exactly this name (names are not
// unique on the platform), the recycle bin's included (DeletionTime set): those are billed
// too.
func (c *Client) FindVGPUs(ctx context.Context, location, name string) ([]VGPU, error) {
	all, err := c.ListAllVGPUs(ctx, location, ListVGPUsOptions{IncludeDeleted: true})
	if err != nil {
		return nil, err
	}
	var out []VGPU
	for _, v := range all {
		if v.Name == name {
			out = append(out, v)
		}
	}
	return out, nil
}

// AttachVGPU attaches a reservation to a VM of the same location.
func (c *Client) AttachVGPU(ctx context.Context, cloudspaceID string, vmID int, vgpuID string) error {
	return c.do(ctx, opAttachVGPU, call{path: args(cloudspaceID, itoa(vmID), vgpuID)}, nil)
}

// DetachVGPU detaches a reservation; it stays reserved and billed.
func (c *Client) DetachVGPU(ctx context.Context, cloudspaceID string, vmID int, vgpuID string) error {
	return c.do(ctx, opDetachVGPU, call{path: args(cloudspaceID, itoa(vmID), vgpuID)}, nil)
}

// RestoreVGPU takes a reservation out of the recycle bin, unattached.
func (c *Client) RestoreVGPU(ctx context.Context, location, vgpuID string) error {
	return c.do(ctx, opRestoreVGPU, call{path: args(location, vgpuID)}, nil)
}

// ReleaseVGPU releases a reservation for good (detach=true, permanently=true): anything less
// leaves it in the recycle bin, still billed.
func (c *Client) ReleaseVGPU(ctx context.Context, location, vgpuID string) error {
	q := query{}.bool("detach", true).bool("permanently", true)
	return c.do(ctx, opReleaseVGPU, call{path: args(location, vgpuID), query: q.values()}, nil)
}
