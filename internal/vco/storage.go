package vco

import (
	"context"
	"encoding/json"
)

// Images and disks are location-scoped: their paths hang off /locations/{location}, so a
// cloudspace-scoped credential cannot create them (it can attach disks, whose path is the VM's).

const (
	pathImages = "/customers/{customer_id}/locations/{location}/vm-images"
	pathImage  = pathImages + "/{image_id}"
	pathDisks  = "/customers/{customer_id}/locations/{location}/disks"
	pathDisk   = pathDisks + "/{disk_id}"
)

var (
	opListImages  = get("ListImages", pathImages)
	opGetImage    = get("GetImage", pathImage)
	opCreateImage = post("CreateImage", pathImages)
	opDeleteImage = del("DeleteImage", pathImage)
	// The operator's publish call is not in the customer swagger (vco-api.md gap 7); this is
	// the simulator's path for it.
	opPublishImage = put("PublishImage", "/admin/locations/{location}/vm-images/{image_id}/public")
	opListDisks    = get("ListDisks", pathDisks)
	opCreateDisk   = post("CreateDisk", pathDisks)
	opGetDisk      = get("GetDisk", pathDisk)
	opDeleteDisk   = del("DeleteDisk", pathDisk)
	opListVMDisks  = get("ListVMDisks", pathVM+"/disks")
	opAttachDisk   = post("AttachDisk", pathVM+"/disks")
	opDetachDisk   = del("DetachDisk", pathVM+"/disks/{disk_id}")
)

// Image is a VM image of one location; the same OS has a different id in every location.
type Image struct {
	ID          int    `json:"image_id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Status      string `json:"status"`
	OSType      string `json:"os_type"`
	OSName      string `json:"os_name"`
	BootType    string `json:"boot_type"`
	BootDiskGiB int    `json:"boot_disk_size"`
	MemoryMiB   int    `json:"memory"`
	Public      bool   `json:"public"`
}

// ListImages lists the public images of a location and the customer's own.
func (c *Client) ListImages(ctx context.Context, location string) ([]Image, error) {
	var out resultList[Image]
	err := c.do(ctx, opListImages, call{path: args(location)}, &out)
	return out.Result, err
}

// GetImage reads one image.
func (c *Client) GetImage(ctx context.Context, location string, id int) (Image, error) {
	var out Image
	err := c.do(ctx, opGetImage, call{path: args(location, itoa(id))}, &out)
	return out, err
}

// FindImage looks an image up by name in a location.
func (c *Client) FindImage(ctx context.Context, location, name string) (Image, error) {
	imgs, err := c.ListImages(ctx, location)
	if err != nil {
		return Image{}, err
	}
	return unique(imgs, name, "image", func(i Image) (string, string) { return i.Name, itoa(i.ID) })
}

// CreateImageRequest registers an image the location downloads from URL.
type CreateImageRequest struct {
	Name        string
	URL         string
	MemoryMiB   int
	BootDiskGiB int
	BootType    string // bios, uefi
	OSType      string // Linux, Windows, ...
	OSName      string
	Tags        string
}

// CreateImage publishes an image in a location. It needs an admin (operator) credential;
// a cluster's service credential gets ErrForbidden. The swagger gives the answer no body,
// so when none comes back the image is looked up by name.
func (c *Client) CreateImage(ctx context.Context, location string, req CreateImageRequest) (int, error) {
	q := query{}.str("name", req.Name).str("url", req.URL).must("memory", req.MemoryMiB).must("boot_disk_size", req.BootDiskGiB).
		str("boot_type", req.BootType).str("os_type", req.OSType).str("os_name", req.OSName).str("tags", req.Tags)
	var out struct {
		ID int `json:"image_id"`
	}
	if err := c.do(ctx, opCreateImage, call{path: args(location), query: q.values()}, &out); err != nil {
		return 0, err
	}
	if out.ID != 0 {
		return out.ID, nil
	}
	img, err := c.FindImage(ctx, location, req.Name)
	return img.ID, err
}

// PublishImage makes an image of a location public, visible to every customer there. It is an
// operator action: any other credential gets ErrForbidden.
func (c *Client) PublishImage(ctx context.Context, location string, id int) error {
	return c.do(ctx, opPublishImage, call{path: args(location, itoa(id))}, nil)
}

// DeleteImage deletes one of the customer's images.
func (c *Client) DeleteImage(ctx context.Context, location string, id int, permanently bool) error {
	return c.do(ctx, opDeleteImage, call{path: args(location, itoa(id)), query: query{}.bool("permanently", permanently).values()}, nil)
}

// Disk is a location-scoped virtual disk.
type Disk struct {
	ID           int    `json:"disk_id"`
	Name         string `json:"disk_name"`
	Description  string `json:"description"`
	SizeGiB      int    `json:"disk_size"`
	Type         string `json:"disk_type"` // BOOT, DATA, PHYSICAL
	Status       string `json:"status"`
	VMID         int    `json:"-"` // 0 when detached
	CloudspaceID string `json:"-"`
	IOPS         int    `json:"-"`
}

// UnmarshalJSON reads the nullable vm_id/cloudspace_id and iotune.iops.
func (d *Disk) UnmarshalJSON(b []byte) error {
	type plain Disk
	var w struct {
		plain
		VMID         flexInt    `json:"vm_id"`
		CloudspaceID flexString `json:"cloudspace_id"`
		IOTune       *struct {
			IOPS flexInt `json:"iops"`
		} `json:"iotune"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*d = Disk(w.plain)
	d.VMID, d.CloudspaceID = int(w.VMID), string(w.CloudspaceID)
	if w.IOTune != nil {
		d.IOPS = int(w.IOTune.IOPS)
	}
	return nil
}

// CreateDiskRequest creates a data disk; VMID attaches it at once.
type CreateDiskRequest struct {
	Name        string
	Description string // required by the API; defaults to Name
	SizeGiB     int
	IOPS        int    // default 2000
	Type        string // default DATA
	VMID        int
}

// CreateDisk creates a disk in a location. A cloudspace-scoped credential gets ErrForbidden:
// disk create needs a location (or customer) grant.
func (c *Client) CreateDisk(ctx context.Context, location string, req CreateDiskRequest) (int, error) {
	desc := req.Description
	if desc == "" {
		desc = req.Name
	}
	q := query{}.str("disk_name", req.Name).str("description", desc).must("disk_size", req.SizeGiB).int("iops", req.IOPS).str("disk_type", req.Type)
	if req.VMID != 0 {
		q.str("vm_id", itoa(req.VMID))
	}
	var out struct {
		ID int `json:"disk_id"`
	}
	if err := c.do(ctx, opCreateDisk, call{path: args(location), query: q.values()}, &out); err != nil {
		return 0, err
	}
	return out.ID, nil
}

// GetDisk reads one disk.
func (c *Client) GetDisk(ctx context.Context, location string, id int) (Disk, error) {
	var out Disk
	err := c.do(ctx, opGetDisk, call{path: args(location, itoa(id))}, &out)
	return out, err
}

// ListDisks lists the disks of a location.
func (c *Client) ListDisks(ctx context.Context, location string) ([]Disk, error) {
	var out resultList[Disk]
	err := c.do(ctx, opListDisks, call{path: args(location)}, &out)
	return out.Result, err
}

// DeleteDisk deletes a disk, detaching it first.
func (c *Client) DeleteDisk(ctx context.Context, location string, id int, permanently bool) error {
	q := query{}.bool("detach", true).bool("permanently", permanently)
	return c.do(ctx, opDeleteDisk, call{path: args(location, itoa(id)), query: q.values()}, nil)
}

// ListVMDisks lists the disks attached to a VM.
func (c *Client) ListVMDisks(ctx context.Context, cloudspaceID string, vmID int) ([]VMDisk, error) {
	var out resultList[VMDisk]
	err := c.do(ctx, opListVMDisks, call{path: args(cloudspaceID, itoa(vmID))}, &out)
	return out.Result, err
}

// AttachDisk attaches an existing disk of the VM's location to the VM.
func (c *Client) AttachDisk(ctx context.Context, cloudspaceID string, vmID, diskID int) error {
	return c.do(ctx, opAttachDisk, call{path: args(cloudspaceID, itoa(vmID)), query: query{}.must("disk_id", diskID).values()}, nil)
}

// DetachDisk detaches a data disk from a VM; the disk stays (and stays billed).
func (c *Client) DetachDisk(ctx context.Context, cloudspaceID string, vmID, diskID int) error {
	return c.do(ctx, opDetachDisk, call{path: args(cloudspaceID, itoa(vmID), itoa(diskID))}, nil)
}
