package csi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/capx-io/capx/internal/capvco/ccm/instances"
	"github.com/capx-io/capx/internal/capvco/csi/config"
	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/vco"
)

// Platform is the part of the whitesky.cloud API the controller uses.
type Platform interface {
	instances.API
	FindCloudspace(ctx context.Context, location, name string) (vco.Cloudspace, error)
	CreateDisk(ctx context.Context, location string, req vco.CreateDiskRequest) (int, error)
	GetDisk(ctx context.Context, location string, id int) (vco.Disk, error)
	ListDisks(ctx context.Context, location string) ([]vco.Disk, error)
	DeleteDisk(ctx context.Context, location string, id int, permanently bool) error
	AttachDisk(ctx context.Context, cloudspaceID string, vmID, diskID int) error
	DetachDisk(ctx context.Context, cloudspaceID string, vmID, diskID int) error
	ResizeDisk(ctx context.Context, location string, id, sizeGiB int) error
	ListDiskSnapshots(ctx context.Context, location string, diskID int, includeAutomatic bool) ([]vco.Snapshot, error)
	TakeDiskSnapshot(ctx context.Context, location string, diskID int, name string) (string, error)
	DeleteDiskSnapshot(ctx context.Context, location string, diskID int, snapshotID string) error
	CloneDiskSnapshot(ctx context.Context, location string, diskID int, snapshotID, name, description string) (int, error)
	GetLocationCapacity(ctx context.Context, location string) (vco.Capacity, error)
}

// KeyWrapper makes and unwraps per-volume keys (the transit client).
type KeyWrapper interface {
	NewDataKey(ctx context.Context) (key []byte, wrapped string, err error)
	Unwrap(ctx context.Context, wrapped string) ([]byte, error)
}

// Controller is the CSI controller service.
type Controller struct {
	csipb.UnimplementedControllerServer
	Config config.Config
	// Platform returns the client for the current credential; it is called for every
	// operation, so a rotated credential Secret is picked up without a restart.
	Platform func() (Platform, error)
	// Keys wraps volume keys; nil when the vault mode is none.
	Keys KeyWrapper

	locks locks
}

const gib = 1 << 30

// Volume context keys handed to the node plugin.
const (
	ctxEncrypted  = "csi.capvco.io/encrypted"
	ctxWrappedKey = "csi.capvco.io/wrapped-key"
)

// CheckGrant is the start-up check: the credential reads the disks of every location of the
// cluster. A cloudspace-scoped credential gets 403 here, which is the 403 disk create would
// give later, so the driver stops with the reason instead.
func (c *Controller) CheckGrant(ctx context.Context) error {
	api, err := c.Platform()
	if err != nil {
		return err
	}
	for _, loc := range c.Config.Locations() {
		if _, err := api.ListDisks(ctx, loc); err != nil {
			if errors.Is(err, vco.ErrForbidden) {
				return fmt.Errorf("the credential may not use the disks of location %s (%w): disks are location-scoped, so the CSI driver needs a location grant (read, create, update, delete) on %s, not a cloudspace grant (docs/capvco/storage.md)", loc, err, loc)
			}
			return fmt.Errorf("listing the disks of location %s: %w", loc, err)
		}
	}
	return nil
}

func (c *Controller) api() (Platform, error) {
	api, err := c.Platform()
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "%v", err)
	}
	return api, nil
}

// apiError maps a platform error to a gRPC status.
func apiError(what string, err error) error {
	code := codes.Internal
	switch {
	case errors.Is(err, vco.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, vco.ErrForbidden):
		code = codes.PermissionDenied
	case errors.Is(err, vco.ErrConflict):
		code = codes.FailedPrecondition
	case errors.Is(err, vco.ErrBadRequest):
		code = codes.InvalidArgument
	case vco.IsTransient(err):
		code = codes.Unavailable
	}
	return status.Errorf(code, "%s: %v", what, err)
}

var controllerCaps = []csipb.ControllerServiceCapability_RPC_Type{
	csipb.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
	csipb.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
	csipb.ControllerServiceCapability_RPC_LIST_VOLUMES,
	csipb.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
	csipb.ControllerServiceCapability_RPC_GET_VOLUME,
	csipb.ControllerServiceCapability_RPC_GET_CAPACITY,
	csipb.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
	csipb.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
	csipb.ControllerServiceCapability_RPC_GET_SNAPSHOT,
	csipb.ControllerServiceCapability_RPC_CLONE_VOLUME,
	csipb.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	csipb.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
}

// ControllerGetCapabilities implements csi.ControllerServer.
func (c *Controller) ControllerGetCapabilities(context.Context, *csipb.ControllerGetCapabilitiesRequest) (*csipb.ControllerGetCapabilitiesResponse, error) {
	out := &csipb.ControllerGetCapabilitiesResponse{}
	for _, t := range controllerCaps {
		out.Capabilities = append(out.Capabilities, &csipb.ControllerServiceCapability{
			Type: &csipb.ControllerServiceCapability_Rpc{Rpc: &csipb.ControllerServiceCapability_RPC{Type: t}}})
	}
	return out, nil
}

// ours reads a disk and checks this cluster's marker on it.
func (c *Controller) ours(ctx context.Context, api Platform, location string, diskID int) (vco.Disk, marker, error) {
	d, err := api.GetDisk(ctx, location, diskID)
	if err != nil {
		return vco.Disk{}, marker{}, apiError(fmt.Sprintf("disk %d in %s", diskID, location), err)
	}
	m, err := parseMarker(d.Description)
	if err == nil && m.Cluster != c.Config.Cluster.String() {
		err = fmt.Errorf("it belongs to cluster %s", m.Cluster)
	}
	if err != nil {
		return vco.Disk{}, marker{}, status.Errorf(codes.NotFound, "disk %d in %s is not a volume of cluster %s: %v", diskID, location, c.Config.Cluster, err)
	}
	if !slices.Contains(c.Config.Locations(), location) {
		return vco.Disk{}, marker{}, status.Errorf(codes.NotFound, "location %s is not one of the cluster's", location)
	}
	return d, m, nil
}

// sizeGiB turns a capacity range into whole GiB: at least the required bytes, at least 1 GiB,
// at most the limit.
func sizeGiB(r *csipb.CapacityRange, atLeast int) (int, error) {
	req, limit := int64(0), int64(0)
	if r != nil {
		req, limit = r.RequiredBytes, r.LimitBytes
	}
	if req < 0 || limit < 0 {
		return 0, status.Error(codes.InvalidArgument, "capacity_range: negative bytes")
	}
	if limit > 0 && req > limit {
		return 0, status.Errorf(codes.InvalidArgument, "capacity_range: required %d bytes is above the limit %d", req, limit)
	}
	size := int((req + gib - 1) / gib)
	size = max(size, atLeast, 1)
	if limit > 0 && int64(size)*gib > limit {
		return 0, status.Errorf(codes.OutOfRange, "capacity_range: disks come in whole GiB; %d GiB is above the limit of %d bytes", size, limit)
	}
	return size, nil
}

// pickLocation chooses the disk's location from the topology requirement: the first
// preferred, else the first requisite, that is one of the cluster's locations.
func (c *Controller) pickLocation(req *csipb.TopologyRequirement) (string, error) {
	locs := c.Config.Locations()
	if req == nil || (len(req.Preferred) == 0 && len(req.Requisite) == 0) {
		return locs[0], nil
	}
	for _, group := range [][]*csipb.Topology{req.Preferred, req.Requisite} {
		for _, t := range group {
			if l := t.GetSegments()[TopologyLocation]; slices.Contains(locs, l) {
				return l, nil
			}
		}
	}
	return "", status.Errorf(codes.ResourceExhausted, "accessibility_requirements name none of the cluster's locations %v (key %s)", locs, TopologyLocation)
}

func allowed(req *csipb.TopologyRequirement, location string) bool {
	if req == nil || len(req.Requisite) == 0 {
		return true
	}
	for _, t := range req.Requisite {
		if t.GetSegments()[TopologyLocation] == location {
			return true
		}
	}
	return false
}

func topology(location string) []*csipb.Topology {
	return []*csipb.Topology{{Segments: map[string]string{TopologyLocation: location}}}
}

// CreateVolume implements csi.ControllerServer.
func (c *Controller) CreateVolume(ctx context.Context, req *csipb.CreateVolumeRequest) (*csipb.CreateVolumeResponse, error) {
	if err := checkName(req.GetName()); err != nil {
		return nil, err
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	params, err := parseParameters(req.GetParameters())
	if err != nil {
		return nil, err
	}
	size, err := sizeGiB(req.GetCapacityRange(), 0)
	if err != nil {
		return nil, err
	}
	unlock, err := c.locks.try("name/" + req.GetName())
	if err != nil {
		return nil, err
	}
	defer unlock()
	api, err := c.api()
	if err != nil {
		return nil, err
	}
	src, err := c.source(ctx, api, req.GetVolumeContentSource())
	if err != nil {
		return nil, err
	}
	location := src.location
	if location == "" {
		if location, err = c.pickLocation(req.GetAccessibilityRequirements()); err != nil {
			return nil, err
		}
	} else if !allowed(req.GetAccessibilityRequirements(), location) {
		return nil, status.Errorf(codes.ResourceExhausted, "the content source is in location %s, which accessibility_requirements exclude: a disk cannot leave its location", location)
	}
	if existing, found, err := c.byName(ctx, api, location, req.GetName()); err != nil {
		return nil, err
	} else if found {
		return c.existing(req, existing, location, size)
	}
	m := marker{Cluster: c.Config.Cluster.String(), Name: req.GetName()}
	switch {
	case src.diskID != 0:
		if params.encrypted != (src.wrappedKey != "") {
			return nil, status.Errorf(codes.InvalidArgument, "the StorageClass's encrypted=%t differs from its content source's: a clone keeps its source's encryption", params.encrypted)
		}
		m.WrappedKey = src.wrappedKey
	case params.encrypted:
		if m.WrappedKey, err = c.newKey(ctx); err != nil {
			return nil, err
		}
	}
	id, err := c.create(ctx, api, location, size, params, m, src)
	if err != nil {
		return nil, err
	}
	d, err := api.GetDisk(ctx, location, id)
	if err != nil {
		return nil, apiError("reading the new disk", err)
	}
	return &csipb.CreateVolumeResponse{Volume: volume(location, d, m, req.GetVolumeContentSource())}, nil
}

// newKey makes the volume's key and keeps only its wrapped form: the key itself is made
// again by unwrapping on the node that opens the volume.
func (c *Controller) newKey(ctx context.Context) (string, error) {
	if c.Keys == nil {
		return "", status.Errorf(codes.InvalidArgument, "the StorageClass asks for encryption, but the cluster's spec.encryption.vaultMode is %s: set vaultMode external with a transit key (docs/capvco/storage.md)", c.Config.Encryption.VaultMode)
	}
	key, wrapped, err := c.Keys.NewDataKey(ctx)
	clear(key)
	if err != nil {
		return "", status.Errorf(codes.Unavailable, "a key for the volume: %v", err)
	}
	return wrapped, nil
}

func (c *Controller) create(ctx context.Context, api Platform, location string, size int, p parameters, m marker, src source) (int, error) {
	if src.diskID == 0 {
		id, err := api.CreateDisk(ctx, location, vco.CreateDiskRequest{Name: m.Name, Description: m.String(), SizeGiB: size, IOPS: p.iops})
		if err != nil {
			return 0, createError(location, err)
		}
		return id, nil
	}
	snap := src.snapshotID
	if snap == "" {
		// A volume clone goes through a snapshot of its own, deleted once the clone exists.
		var err error
		if snap, err = api.TakeDiskSnapshot(ctx, location, src.diskID, "clone-"+m.Name); err != nil {
			return 0, apiError("snapshotting the source volume", err)
		}
		defer func() { _ = api.DeleteDiskSnapshot(context.WithoutCancel(ctx), location, src.diskID, snap) }()
	}
	id, err := api.CloneDiskSnapshot(ctx, location, src.diskID, snap, m.Name, m.String())
	if err != nil {
		return 0, createError(location, err)
	}
	// A clone has its snapshot's size; the request may want more.
	clone, err := api.GetDisk(ctx, location, id)
	if err != nil {
		return 0, apiError("reading the clone", err)
	}
	if size > clone.SizeGiB {
		if err := api.ResizeDisk(ctx, location, id, size); err != nil {
			return 0, apiError("growing the clone", err)
		}
	}
	return id, nil
}

func createError(location string, err error) error {
	if errors.Is(err, vco.ErrForbidden) {
		return status.Errorf(codes.PermissionDenied, "creating a disk in %s: %v: the driver's credential needs a location grant on %s; a cloudspace grant cannot create disks", location, err, location)
	}
	return apiError("creating the disk in "+location, err)
}

// existing answers a repeated CreateVolume: the same name with a compatible size is the same
// volume.
func (c *Controller) existing(req *csipb.CreateVolumeRequest, d vco.Disk, location string, size int) (*csipb.CreateVolumeResponse, error) {
	limit := req.GetCapacityRange().GetLimitBytes()
	if d.SizeGiB < size || (limit > 0 && int64(d.SizeGiB)*gib > limit) {
		return nil, status.Errorf(codes.AlreadyExists, "volume %s exists with %d GiB, outside the requested range", req.GetName(), d.SizeGiB)
	}
	m, _ := parseMarker(d.Description)
	return &csipb.CreateVolumeResponse{Volume: volume(location, d, m, req.GetVolumeContentSource())}, nil
}

func volume(location string, d vco.Disk, m marker, src *csipb.VolumeContentSource) *csipb.Volume {
	v := &csipb.Volume{VolumeId: VolumeID(location, d.ID), CapacityBytes: int64(d.SizeGiB) * gib, AccessibleTopology: topology(location),
		ContentSource: src, VolumeContext: map[string]string{}}
	if m.WrappedKey != "" {
		v.VolumeContext[ctxEncrypted] = "true"
		v.VolumeContext[ctxWrappedKey] = m.WrappedKey
	}
	return v
}

// byName finds this cluster's live disk created under name.
func (c *Controller) byName(ctx context.Context, api Platform, location, name string) (vco.Disk, bool, error) {
	disks, err := api.ListDisks(ctx, location)
	if err != nil {
		return vco.Disk{}, false, apiError("listing the disks of "+location, err)
	}
	for _, d := range disks {
		if m, err := parseMarker(d.Description); err == nil && m.Cluster == c.Config.Cluster.String() && m.Name == name && d.Status != "DELETED" {
			return d, true, nil
		}
	}
	return vco.Disk{}, false, nil
}

// source is a CreateVolume's content source, resolved.
type source struct {
	location   string
	diskID     int
	snapshotID string // empty for a volume clone
	sizeGiB    int
	wrappedKey string
}

func (c *Controller) source(ctx context.Context, api Platform, cs *csipb.VolumeContentSource) (source, error) {
	switch {
	case cs == nil:
		return source{}, nil
	case cs.GetSnapshot() != nil:
		loc, disk, snap, err := ParseSnapshotID(cs.GetSnapshot().GetSnapshotId())
		if err != nil {
			return source{}, status.Errorf(codes.NotFound, "%v", err)
		}
		d, m, err := c.ours(ctx, api, loc, disk)
		if err != nil {
			return source{}, err
		}
		snaps, err := api.ListDiskSnapshots(ctx, loc, disk, false)
		if err != nil {
			return source{}, apiError("listing the snapshots of the source", err)
		}
		i := slices.IndexFunc(snaps, func(s vco.Snapshot) bool { return s.ID == snap })
		if i < 0 {
			return source{}, status.Errorf(codes.NotFound, "snapshot %s not found", clipID(cs.GetSnapshot().GetSnapshotId()))
		}
		_, size := parseSnapshotName(snaps[i].Name)
		if size == 0 {
			size = d.SizeGiB
		}
		return source{location: loc, diskID: disk, snapshotID: snap, sizeGiB: size, wrappedKey: m.WrappedKey}, nil
	case cs.GetVolume() != nil:
		loc, disk, err := ParseVolumeID(cs.GetVolume().GetVolumeId())
		if err != nil {
			return source{}, status.Errorf(codes.NotFound, "%v", err)
		}
		d, m, err := c.ours(ctx, api, loc, disk)
		if err != nil {
			return source{}, err
		}
		return source{location: loc, diskID: disk, sizeGiB: d.SizeGiB, wrappedKey: m.WrappedKey}, nil
	}
	return source{}, status.Error(codes.InvalidArgument, "volume_content_source is neither a snapshot nor a volume")
}

// DeleteVolume implements csi.ControllerServer: the disk is deleted permanently, so nothing
// stays in the recycle bin or on the bill.
func (c *Controller) DeleteVolume(ctx context.Context, req *csipb.DeleteVolumeRequest) (*csipb.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is empty")
	}
	location, diskID, err := ParseVolumeID(req.GetVolumeId())
	if err != nil {
		return &csipb.DeleteVolumeResponse{}, nil // no volume of ours can have this id
	}
	unlock, err := c.locks.try(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	api, err := c.api()
	if err != nil {
		return nil, err
	}
	d, _, err := c.ours(ctx, api, location, diskID)
	if status.Code(err) == codes.NotFound {
		return &csipb.DeleteVolumeResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	if d.VMID != 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is attached to VM %d: unpublish it first", req.GetVolumeId(), d.VMID)
	}
	snaps, err := api.ListDiskSnapshots(ctx, location, diskID, false)
	if err != nil {
		return nil, apiError("listing the volume's snapshots", err)
	}
	if len(snaps) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s has %d snapshots, which the platform deletes with the disk: delete its VolumeSnapshots first", req.GetVolumeId(), len(snaps))
	}
	if err := api.DeleteDisk(ctx, location, diskID, true); err != nil && !errors.Is(err, vco.ErrNotFound) {
		return nil, apiError("deleting the disk", err)
	}
	return &csipb.DeleteVolumeResponse{}, nil
}

// node resolves a node id (the Node's provider ID) to its VM in the cluster's sites.
func (c *Controller) node(ctx context.Context, api Platform, nodeID string) (instances.Found, error) {
	location, _, err := names.ParseProviderID(nodeID)
	if err != nil {
		return instances.Found{}, status.Errorf(codes.NotFound, "node id: %v", err)
	}
	sites, err := c.sites(ctx, api, location)
	if err != nil {
		return instances.Found{}, err
	}
	f, err := instances.ByProviderID(ctx, api, sites, nodeID)
	if errors.Is(err, vco.ErrNotFound) || errors.Is(err, instances.ErrNotFound) {
		return instances.Found{}, status.Errorf(codes.NotFound, "node %s: %v", clipID(nodeID), err)
	}
	if err != nil {
		return instances.Found{}, status.Errorf(codes.NotFound, "node %s: %v", clipID(nodeID), err)
	}
	return f, nil
}

// sites resolves the cluster's sites in location to their cloudspaces.
func (c *Controller) sites(ctx context.Context, api Platform, location string) ([]instances.Site, error) {
	var out []instances.Site
	for _, s := range c.Config.Sites {
		if s.Location != location {
			continue
		}
		id := s.CloudspaceID
		if id == "" {
			cs, err := api.FindCloudspace(ctx, s.Location, c.Config.CloudspaceName(s))
			if err != nil {
				return nil, apiError("site "+s.Name+": finding its cloudspace", err)
			}
			id = cs.ID
		}
		out = append(out, instances.Site{Name: s.Name, Location: s.Location, CloudspaceID: id})
	}
	if len(out) == 0 {
		return nil, status.Errorf(codes.NotFound, "location %s has none of the cluster's sites", location)
	}
	return out, nil
}

// ControllerPublishVolume implements csi.ControllerServer: attach the disk to the node's VM.
func (c *Controller) ControllerPublishVolume(ctx context.Context, req *csipb.ControllerPublishVolumeRequest) (*csipb.ControllerPublishVolumeResponse, error) {
	if req.GetVolumeId() == "" || req.GetNodeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id and node_id are required")
	}
	if err := checkCapabilities([]*csipb.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	if req.GetReadonly() {
		return nil, status.Error(codes.InvalidArgument, "the platform attaches disks read-write only; mount read-only on the node instead (readOnly in the Pod)")
	}
	location, diskID, err := ParseVolumeID(req.GetVolumeId())
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "%v", err)
	}
	unlock, err := c.locks.try(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	api, err := c.api()
	if err != nil {
		return nil, err
	}
	d, _, err := c.ours(ctx, api, location, diskID)
	if err != nil {
		return nil, err
	}
	target, err := c.node(ctx, api, req.GetNodeId())
	if err != nil {
		return nil, err
	}
	if target.Site.Location != location {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is in location %s and node %s in %s: a disk attaches only in its location (the PV's node affinity keeps Pods there)", req.GetVolumeId(), location, req.GetNodeId(), target.Site.Location)
	}
	pc := map[string]string{"diskID": strconv.Itoa(diskID)}
	switch {
	case d.VMID == target.VM.ID:
		return &csipb.ControllerPublishVolumeResponse{PublishContext: pc}, nil
	case d.VMID != 0:
		if err := c.release(ctx, api, d, location); err != nil {
			return nil, err
		}
	}
	if err := api.AttachDisk(ctx, target.Site.CloudspaceID, target.VM.ID, diskID); err != nil {
		if errors.Is(err, vco.ErrBadRequest) {
			return nil, status.Errorf(codes.ResourceExhausted, "attaching volume %s to node %s: %v", req.GetVolumeId(), req.GetNodeId(), err)
		}
		return nil, apiError("attaching the disk", err)
	}
	return &csipb.ControllerPublishVolumeResponse{PublishContext: pc}, nil
}

// release frees a disk held by another VM, when that is safe: the VM is gone or halted, so
// nothing writes to the disk. A running VM keeps it, and the call fails until the CO has
// unpublished the volume there (after the old Pod and mount are gone).
func (c *Controller) release(ctx context.Context, api Platform, d vco.Disk, location string) error {
	holder := names.ProviderID(location, d.VMID)
	vm, err := api.GetVM(ctx, d.CloudspaceID, d.VMID)
	if err != nil && !errors.Is(err, vco.ErrNotFound) {
		return apiError("reading the VM that holds the disk", err)
	}
	if err == nil && !instances.Gone(vm) && !instances.Shutdown(vm) {
		return status.Errorf(codes.FailedPrecondition, "volume %s is attached to running node %s: it moves once the volume is unpublished there", VolumeID(location, d.ID), holder)
	}
	if err := api.DetachDisk(ctx, d.CloudspaceID, d.VMID, d.ID); err != nil && !errors.Is(err, vco.ErrNotFound) {
		return apiError("detaching the disk from stopped node "+holder, err)
	}
	return nil
}

// ControllerUnpublishVolume implements csi.ControllerServer: detach the disk from the node's
// VM (from any VM when node_id is empty). A disk not attached there is already unpublished.
func (c *Controller) ControllerUnpublishVolume(ctx context.Context, req *csipb.ControllerUnpublishVolumeRequest) (*csipb.ControllerUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	location, diskID, err := ParseVolumeID(req.GetVolumeId())
	if err != nil {
		return &csipb.ControllerUnpublishVolumeResponse{}, nil
	}
	vmID := 0
	if req.GetNodeId() != "" {
		loc, id, err := names.ParseProviderID(req.GetNodeId())
		if err != nil || loc != location {
			return &csipb.ControllerUnpublishVolumeResponse{}, nil // the disk cannot be attached there
		}
		vmID = id
	}
	unlock, err := c.locks.try(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	api, err := c.api()
	if err != nil {
		return nil, err
	}
	d, _, err := c.ours(ctx, api, location, diskID)
	if status.Code(err) == codes.NotFound {
		return &csipb.ControllerUnpublishVolumeResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	if d.VMID == 0 || (vmID != 0 && d.VMID != vmID) {
		return &csipb.ControllerUnpublishVolumeResponse{}, nil
	}
	if err := api.DetachDisk(ctx, d.CloudspaceID, d.VMID, diskID); err != nil && !errors.Is(err, vco.ErrNotFound) {
		return nil, apiError("detaching the disk", err)
	}
	return &csipb.ControllerUnpublishVolumeResponse{}, nil
}

// ValidateVolumeCapabilities implements csi.ControllerServer.
func (c *Controller) ValidateVolumeCapabilities(ctx context.Context, req *csipb.ValidateVolumeCapabilitiesRequest) (*csipb.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" || len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume_id and volume_capabilities are required")
	}
	location, diskID, err := ParseVolumeID(req.GetVolumeId())
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "%v", err)
	}
	api, err := c.api()
	if err != nil {
		return nil, err
	}
	if _, _, err := c.ours(ctx, api, location, diskID); err != nil {
		return nil, err
	}
	if _, err := parseParameters(req.GetParameters()); err != nil {
		return &csipb.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csipb.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	return &csipb.ValidateVolumeCapabilitiesResponse{Confirmed: &csipb.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: req.GetVolumeContext(), VolumeCapabilities: req.GetVolumeCapabilities(), Parameters: req.GetParameters()}}, nil
}

// volumes lists this cluster's live disks in every location, in a stable order.
func (c *Controller) volumes(ctx context.Context, api Platform) ([]listed, error) {
	var out []listed
	for _, loc := range c.Config.Locations() {
		disks, err := api.ListDisks(ctx, loc)
		if err != nil {
			return nil, apiError("listing the disks of "+loc, err)
		}
		for _, d := range disks {
			m, err := parseMarker(d.Description)
			if err != nil || m.Cluster != c.Config.Cluster.String() || d.Status == "DELETED" {
				continue
			}
			out = append(out, listed{location: loc, disk: d, marker: m})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].location != out[j].location {
			return out[i].location < out[j].location
		}
		return out[i].disk.ID < out[j].disk.ID
	})
	return out, nil
}

type listed struct {
	location string
	disk     vco.Disk
	marker   marker
}

// page cuts a list at a numeric starting token.
func page(n int, token string, maxEntries int32) (start, end int, next string, err error) {
	if maxEntries < 0 {
		return 0, 0, "", status.Error(codes.InvalidArgument, "max_entries is negative")
	}
	if token != "" {
		start, err = strconv.Atoi(token)
		if err != nil || start < 0 || start > n {
			return 0, 0, "", status.Errorf(codes.Aborted, "starting_token %q is not one this driver handed out", clipID(token))
		}
	}
	end = n
	if maxEntries > 0 && start+int(maxEntries) < n {
		end = start + int(maxEntries)
		next = strconv.Itoa(end)
	}
	return start, end, next, nil
}

// ListVolumes implements csi.ControllerServer.
func (c *Controller) ListVolumes(ctx context.Context, req *csipb.ListVolumesRequest) (*csipb.ListVolumesResponse, error) {
	api, err := c.api()
	if err != nil {
		return nil, err
	}
	all, err := c.volumes(ctx, api)
	if err != nil {
		return nil, err
	}
	start, end, next, err := page(len(all), req.GetStartingToken(), req.GetMaxEntries())
	if err != nil {
		return nil, err
	}
	out := &csipb.ListVolumesResponse{NextToken: next}
	for _, l := range all[start:end] {
		e := &csipb.ListVolumesResponse_Entry{Volume: volume(l.location, l.disk, l.marker, nil), Status: &csipb.ListVolumesResponse_VolumeStatus{}}
		if l.disk.VMID != 0 {
			e.Status.PublishedNodeIds = []string{names.ProviderID(l.location, l.disk.VMID)}
		}
		out.Entries = append(out.Entries, e)
	}
	return out, nil
}

// ControllerGetVolume implements csi.ControllerServer.
func (c *Controller) ControllerGetVolume(ctx context.Context, req *csipb.ControllerGetVolumeRequest) (*csipb.ControllerGetVolumeResponse, error) {
	location, diskID, err := ParseVolumeID(req.GetVolumeId())
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "%v", err)
	}
	api, err := c.api()
	if err != nil {
		return nil, err
	}
	d, m, err := c.ours(ctx, api, location, diskID)
	if err != nil {
		return nil, err
	}
	st := &csipb.ControllerGetVolumeResponse_VolumeStatus{}
	if d.VMID != 0 {
		st.PublishedNodeIds = []string{names.ProviderID(location, d.VMID)}
	}
	return &csipb.ControllerGetVolumeResponse{Volume: volume(location, d, m, nil), Status: st}, nil
}

// GetCapacity implements csi.ControllerServer: the storage the location has left, from its
// capacity's su (read as GiB).
func (c *Controller) GetCapacity(ctx context.Context, req *csipb.GetCapacityRequest) (*csipb.GetCapacityResponse, error) {
	if len(req.GetVolumeCapabilities()) > 0 {
		if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
			return &csipb.GetCapacityResponse{}, nil
		}
	}
	if _, err := parseParameters(req.GetParameters()); err != nil {
		return nil, err
	}
	location := c.Config.Locations()[0]
	if t := req.GetAccessibleTopology(); t != nil {
		location = t.GetSegments()[TopologyLocation]
		if !slices.Contains(c.Config.Locations(), location) {
			return &csipb.GetCapacityResponse{}, nil
		}
	}
	api, err := c.api()
	if err != nil {
		return nil, err
	}
	capa, err := api.GetLocationCapacity(ctx, location)
	if err != nil {
		return nil, apiError("the capacity of "+location, err)
	}
	return &csipb.GetCapacityResponse{AvailableCapacity: int64(capa.SU) * gib}, nil
}

// ControllerExpandVolume implements csi.ControllerServer.
func (c *Controller) ControllerExpandVolume(ctx context.Context, req *csipb.ControllerExpandVolumeRequest) (*csipb.ControllerExpandVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	if req.GetCapacityRange() == nil {
		return nil, status.Error(codes.InvalidArgument, "capacity_range is required")
	}
	location, diskID, err := ParseVolumeID(req.GetVolumeId())
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "%v", err)
	}
	unlock, err := c.locks.try(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	api, err := c.api()
	if err != nil {
		return nil, err
	}
	d, _, err := c.ours(ctx, api, location, diskID)
	if err != nil {
		return nil, err
	}
	size, err := sizeGiB(req.GetCapacityRange(), 0)
	if err != nil {
		return nil, err
	}
	block := req.GetVolumeCapability().GetBlock() != nil
	if size <= d.SizeGiB {
		return &csipb.ControllerExpandVolumeResponse{CapacityBytes: int64(d.SizeGiB) * gib, NodeExpansionRequired: !block}, nil
	}
	if err := api.ResizeDisk(ctx, location, diskID, size); err != nil {
		return nil, apiError("growing the disk", err)
	}
	return &csipb.ControllerExpandVolumeResponse{CapacityBytes: int64(size) * gib, NodeExpansionRequired: !block}, nil
}
