package csi

import (
	"context"
	"errors"
	"strconv"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/capx-io/capx/internal/vco"
)

// CreateSnapshot implements csi.ControllerServer: a snapshot of the one disk (never its VM's
// other disks), named after the CSI snapshot so a repeated call finds it.
func (c *Controller) CreateSnapshot(ctx context.Context, req *csipb.CreateSnapshotRequest) (*csipb.CreateSnapshotResponse, error) {
	if err := checkName(req.GetName()); err != nil {
		return nil, err
	}
	if req.GetSourceVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "source_volume_id is required")
	}
	if len(req.GetParameters()) > 0 {
		for k := range req.GetParameters() {
			if len(k) < 19 || k[:19] != "csi.storage.k8s.io/" {
				return nil, status.Errorf(codes.InvalidArgument, "unknown snapshot parameter %q: the VolumeSnapshotClass takes none", clipID(k))
			}
		}
	}
	location, diskID, err := ParseVolumeID(req.GetSourceVolumeId())
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "%v", err)
	}
	unlock, err := c.locks.try("snapshot/" + req.GetName())
	if err != nil {
		return nil, err
	}
	defer unlock()
	api, err := c.api()
	if err != nil {
		return nil, err
	}
	all, err := c.snapshots(ctx, api)
	if err != nil {
		return nil, err
	}
	for _, s := range all {
		if s.csiName != req.GetName() {
			continue
		}
		if s.location != location || s.diskID != diskID {
			return nil, status.Errorf(codes.AlreadyExists, "snapshot %s exists, of volume %s", req.GetName(), VolumeID(s.location, s.diskID))
		}
		return &csipb.CreateSnapshotResponse{Snapshot: s.csi()}, nil
	}
	d, _, err := c.ours(ctx, api, location, diskID)
	if err != nil {
		return nil, err
	}
	id, err := api.TakeDiskSnapshot(ctx, location, diskID, snapshotName(req.GetName(), d.SizeGiB))
	if err != nil {
		return nil, apiError("snapshotting the disk", err)
	}
	snaps, err := api.ListDiskSnapshots(ctx, location, diskID, false)
	if err != nil {
		return nil, apiError("reading the new snapshot", err)
	}
	for _, s := range snaps {
		if s.ID == id {
			return &csipb.CreateSnapshotResponse{Snapshot: listedSnapshot{location: location, diskID: diskID, snap: s, csiName: req.GetName(), sizeGiB: d.SizeGiB}.csi()}, nil
		}
	}
	return nil, status.Errorf(codes.Internal, "snapshot %s of disk %d was taken but is not listed", id, diskID)
}

type listedSnapshot struct {
	location string
	diskID   int
	snap     vco.Snapshot
	csiName  string
	sizeGiB  int
}

func (s listedSnapshot) csi() *csipb.Snapshot {
	out := &csipb.Snapshot{SnapshotId: SnapshotID(s.location, s.diskID, s.snap.ID), SourceVolumeId: VolumeID(s.location, s.diskID),
		SizeBytes: int64(s.sizeGiB) * gib, ReadyToUse: true}
	if sec, err := strconv.ParseFloat(string(s.snap.Created), 64); err == nil && sec > 0 {
		out.CreationTime = timestamppb.New(time.Unix(int64(sec), 0))
	} else {
		out.CreationTime = timestamppb.New(time.Unix(0, 0))
	}
	return out
}

// snapshots lists the driver's snapshots of this cluster's volumes.
func (c *Controller) snapshots(ctx context.Context, api Platform) ([]listedSnapshot, error) {
	vols, err := c.volumes(ctx, api)
	if err != nil {
		return nil, err
	}
	var out []listedSnapshot
	for _, v := range vols {
		snaps, err := api.ListDiskSnapshots(ctx, v.location, v.disk.ID, false)
		if err != nil {
			return nil, apiError("listing the snapshots of disk "+strconv.Itoa(v.disk.ID), err)
		}
		out = append(out, driverSnapshots(v.location, v.disk.ID, snaps)...)
	}
	return out, nil
}

func driverSnapshots(location string, diskID int, snaps []vco.Snapshot) []listedSnapshot {
	var out []listedSnapshot
	for _, s := range snaps {
		if name, size := parseSnapshotName(s.Name); size > 0 {
			out = append(out, listedSnapshot{location: location, diskID: diskID, snap: s, csiName: name, sizeGiB: size})
		}
	}
	return out
}

// DeleteSnapshot implements csi.ControllerServer.
func (c *Controller) DeleteSnapshot(ctx context.Context, req *csipb.DeleteSnapshotRequest) (*csipb.DeleteSnapshotResponse, error) {
	if req.GetSnapshotId() == "" {
		return nil, status.Error(codes.InvalidArgument, "snapshot_id is required")
	}
	location, diskID, snap, err := ParseSnapshotID(req.GetSnapshotId())
	if err != nil {
		return &csipb.DeleteSnapshotResponse{}, nil
	}
	unlock, err := c.locks.try(req.GetSnapshotId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	api, err := c.api()
	if err != nil {
		return nil, err
	}
	if _, _, err := c.ours(ctx, api, location, diskID); status.Code(err) == codes.NotFound {
		return &csipb.DeleteSnapshotResponse{}, nil
	} else if err != nil {
		return nil, err
	}
	if err := api.DeleteDiskSnapshot(ctx, location, diskID, snap); err != nil && !errors.Is(err, vco.ErrNotFound) {
		return nil, apiError("deleting the snapshot", err)
	}
	return &csipb.DeleteSnapshotResponse{}, nil
}

// ListSnapshots implements csi.ControllerServer.
func (c *Controller) ListSnapshots(ctx context.Context, req *csipb.ListSnapshotsRequest) (*csipb.ListSnapshotsResponse, error) {
	api, err := c.api()
	if err != nil {
		return nil, err
	}
	var all []listedSnapshot
	switch {
	case req.GetSnapshotId() != "":
		loc, disk, snap, err := ParseSnapshotID(req.GetSnapshotId())
		if err != nil {
			return &csipb.ListSnapshotsResponse{}, nil
		}
		if all, err = c.snapshotsOf(ctx, api, loc, disk); err != nil {
			return nil, err
		}
		var one []listedSnapshot
		for _, s := range all {
			if s.snap.ID == snap && (req.GetSourceVolumeId() == "" || req.GetSourceVolumeId() == VolumeID(loc, disk)) {
				one = append(one, s)
			}
		}
		all = one
	case req.GetSourceVolumeId() != "":
		loc, disk, err := ParseVolumeID(req.GetSourceVolumeId())
		if err != nil {
			return &csipb.ListSnapshotsResponse{}, nil
		}
		if all, err = c.snapshotsOf(ctx, api, loc, disk); err != nil {
			return nil, err
		}
	default:
		if all, err = c.snapshots(ctx, api); err != nil {
			return nil, err
		}
	}
	start, end, next, err := page(len(all), req.GetStartingToken(), req.GetMaxEntries())
	if err != nil {
		return nil, err
	}
	out := &csipb.ListSnapshotsResponse{NextToken: next}
	for _, s := range all[start:end] {
		out.Entries = append(out.Entries, &csipb.ListSnapshotsResponse_Entry{Snapshot: s.csi()})
	}
	return out, nil
}

// snapshotsOf lists the snapshots of one of this cluster's volumes; another disk has none.
func (c *Controller) snapshotsOf(ctx context.Context, api Platform, location string, diskID int) ([]listedSnapshot, error) {
	if _, _, err := c.ours(ctx, api, location, diskID); status.Code(err) == codes.NotFound {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	snaps, err := api.ListDiskSnapshots(ctx, location, diskID, false)
	if err != nil {
		return nil, apiError("listing the snapshots", err)
	}
	return driverSnapshots(location, diskID, snaps), nil
}

// GetSnapshot implements csi.ControllerServer.
func (c *Controller) GetSnapshot(ctx context.Context, req *csipb.GetSnapshotRequest) (*csipb.GetSnapshotResponse, error) {
	if req.GetSnapshotId() == "" {
		return nil, status.Error(codes.InvalidArgument, "snapshot_id is required")
	}
	location, diskID, snap, err := ParseSnapshotID(req.GetSnapshotId())
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "%v", err)
	}
	api, err := c.api()
	if err != nil {
		return nil, err
	}
	all, err := c.snapshotsOf(ctx, api, location, diskID)
	if err != nil {
		return nil, err
	}
	for _, s := range all {
		if s.snap.ID == snap {
			return &csipb.GetSnapshotResponse{Snapshot: s.csi()}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "snapshot %s not found", clipID(req.GetSnapshotId()))
}
