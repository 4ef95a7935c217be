package vco

import (
	"context"
	"errors"
	"fmt"
)

// Disk snapshots, clones, rollback, resize and restore. Every path hangs off the disk's
// location, so they need the same location grant as disk create.

const (
	pathDiskSnapshots = pathDisk + "/snapshots"
	pathDiskSnapshot  = pathDiskSnapshots + "/{snapshot_id}"
	pathLocCapacity   = "/customers/{customer_id}/locations/{location}/capacity"
)

var (
	opResizeDisk     = put("ResizeDisk", pathDisk+"/size")
	opRestoreDisk    = put("RestoreDisk", pathDisk+"/restore")
	opListSnapshots  = get("ListDiskSnapshots", pathDiskSnapshots)
	opTakeSnapshot   = post("TakeDiskSnapshot", pathDiskSnapshots)
	opGetSnapshot    = get("GetDiskSnapshot", pathDiskSnapshot)
	opDeleteSnapshot = del("DeleteDiskSnapshot", pathDiskSnapshot)
	opCloneSnapshot  = post("CloneDiskSnapshot", pathDiskSnapshot+"/clone")
	// Rolling back twice to the same snapshot leaves the same content.
	opRollbackSnapshot = postIdempotent("RollbackDiskSnapshot", pathDiskSnapshot+"/rollback")
	opGetCapacity      = get("GetLocationCapacity", pathLocCapacity)
)

// ResizeDisk grows a disk to sizeGiB.
func (c *Client) ResizeDisk(ctx context.Context, location string, id, sizeGiB int) error {
	return c.do(ctx, opResizeDisk, call{path: args(location, itoa(id)), query: query{}.must("disk_size", sizeGiB).values()}, nil)
}

// RestoreDisk brings a disk back from the recycle bin.
func (c *Client) RestoreDisk(ctx context.Context, location string, id int, reason string) error {
	return c.do(ctx, opRestoreDisk, call{path: args(location, itoa(id)), query: query{}.str("reason", reason).values()}, nil)
}

// Snapshot is a point-in-time copy of one disk. Its id is a string, unique per disk.
type Snapshot struct {
	ID        string     `json:"snapshot_id"`
	Name      string     `json:"snapshot_name"`
	Created   flexString `json:"creation_time"` // epoch seconds; the swagger types it string
	Automatic bool       `json:"is_automatic"`
}

// ListDiskSnapshots lists a disk's snapshots; automatic ones (backups) only when asked.
func (c *Client) ListDiskSnapshots(ctx context.Context, location string, diskID int, includeAutomatic bool) ([]Snapshot, error) {
	var out resultList[Snapshot]
	q := query{}.bool("include_automatic", includeAutomatic)
	err := c.do(ctx, opListSnapshots, call{path: args(location, itoa(diskID)), query: q.values()}, &out)
	return out.Result, err
}

// TakeDiskSnapshot snapshots one disk (never the VM's other disks) and returns the snapshot id.
func (c *Client) TakeDiskSnapshot(ctx context.Context, location string, diskID int, name string) (string, error) {
	var id flexString
	q := query{}.str("snapshot_name", name).bool("all_vm_disks", false)
	if err := c.do(ctx, opTakeSnapshot, call{path: args(location, itoa(diskID)), query: q.values()}, &id); err != nil {
		return "", err
	}
	if id == "" {
		return "", fmt.Errorf("vco: TakeDiskSnapshot answered no snapshot id: %w", ErrBadRequest)
	}
	return string(id), nil
}

// SnapshotDetail is one snapshot read by id, with the disks that share it.
type SnapshotDetail struct {
	ID      string     `json:"snapshot_id"`
	Name    string     `json:"snapshot_name"`
	Created flexString `json:"creation_time"`
	Disks   []struct {
		ID flexInt `json:"disk_id"`
	} `json:"disks"`
}

// GetDiskSnapshot reads one snapshot of a disk.
func (c *Client) GetDiskSnapshot(ctx context.Context, location string, diskID int, snapshotID string) (SnapshotDetail, error) {
	var out SnapshotDetail
	err := c.do(ctx, opGetSnapshot, call{path: args(location, itoa(diskID), snapshotID)}, &out)
	return out, err
}

// DeleteDiskSnapshot deletes one snapshot of a disk.
func (c *Client) DeleteDiskSnapshot(ctx context.Context, location string, diskID int, snapshotID string) error {
	return c.do(ctx, opDeleteSnapshot, call{path: args(location, itoa(diskID), snapshotID)}, nil)
}

// CloneDiskSnapshot makes a new disk from a snapshot of one disk and returns its id.
func (c *Client) CloneDiskSnapshot(ctx context.Context, location string, diskID int, snapshotID, name, description string) (int, error) {
	if description == "" {
		description = name
	}
	var out resultList[struct {
		Original flexInt `json:"original_disk_id"`
		New      flexInt `json:"new_disk_id"`
	}]
	q := query{}.str("name", name).str("description", description).bool("all_vm_disks", false)
	if err := c.do(ctx, opCloneSnapshot, call{path: args(location, itoa(diskID), snapshotID), query: q.values()}, &out); err != nil {
		return 0, err
	}
	for _, r := range out.Result {
		if int(r.Original) == diskID && r.New != 0 {
			return int(r.New), nil
		}
	}
	return 0, fmt.Errorf("vco: CloneDiskSnapshot answered no clone of disk %d: %w", diskID, errCloneAnswer)
}

var errCloneAnswer = errors.New("the answer lists no new disk for the snapshot's disk")

// RollbackDiskSnapshot returns one disk to a snapshot's content.
func (c *Client) RollbackDiskSnapshot(ctx context.Context, location string, diskID int, snapshotID string) error {
	q := query{}.bool("all_vm_disks", false)
	return c.do(ctx, opRollbackSnapshot, call{path: args(location, itoa(diskID), snapshotID), query: q.values()}, nil)
}

// Capacity is what a location has left for the customer, in the platform's resource units:
// SU storage, CU compute, MU memory, and so on. The swagger does not give the units.
type Capacity struct {
	CU  int `json:"cu"`
	MU  int `json:"mu"`
	SU  int `json:"su"`
	OU  int `json:"ou"`
	PIU int `json:"piu"`
	VCU int `json:"vcu"`
}

// GetLocationCapacity reads the location's remaining capacity.
func (c *Client) GetLocationCapacity(ctx context.Context, location string) (Capacity, error) {
	var out Capacity
	err := c.do(ctx, opGetCapacity, call{path: args(location)}, &out)
	return out, err
}
