package csi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"

	"github.com/capx-io/capx/internal/capvco/csi/device"
	"github.com/capx-io/capx/internal/capvco/csi/luks"
	"github.com/capx-io/capx/internal/capvco/names"
)

// Node is the CSI node service.
type Node struct {
	csipb.UnimplementedNodeServer
	// NodeID is the node's provider ID, vco://<location>/<vm id>: the controller attaches
	// to that VM.
	NodeID string
	// MaxVolumes is how many volumes the node takes (the VM's disk limit less its boot disk).
	MaxVolumes int64
	// Devices finds attached disks by serial.
	Devices device.Finder
	// Crypt opens encrypted volumes; Keys unwraps their keys (nil: vault mode none).
	Crypt luks.Cryptsetup
	Keys  KeyWrapper
	// Mounter formats and mounts; NewNode sets the real one.
	Mounter *mount.SafeFormatAndMount
	Resizer *mount.ResizeFs

	locks locks
}

// NewNode builds the node service on the host's mount and mkfs tools.
func NewNode(nodeID string, maxVolumes int64, devices device.Finder, keys KeyWrapper) (*Node, error) {
	if _, _, err := names.ParseProviderID(nodeID); err != nil {
		return nil, fmt.Errorf("node id: %w", err)
	}
	ex := utilexec.New()
	return &Node{NodeID: nodeID, MaxVolumes: maxVolumes, Devices: devices, Keys: keys,
		Mounter: mount.NewSafeFormatAndMount(mount.New(""), ex), Resizer: mount.NewResizeFs(ex)}, nil
}

// NodeGetInfo implements csi.NodeServer.
func (n *Node) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	location, _, err := names.ParseProviderID(n.NodeID)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	return &csipb.NodeGetInfoResponse{NodeId: n.NodeID, MaxVolumesPerNode: n.MaxVolumes,
		AccessibleTopology: &csipb.Topology{Segments: map[string]string{TopologyLocation: location}}}, nil
}

// NodeGetCapabilities implements csi.NodeServer.
func (n *Node) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	out := &csipb.NodeGetCapabilitiesResponse{}
	for _, t := range []csipb.NodeServiceCapability_RPC_Type{
		csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME, csipb.NodeServiceCapability_RPC_EXPAND_VOLUME,
		csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS, csipb.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	} {
		out.Capabilities = append(out.Capabilities, &csipb.NodeServiceCapability{
			Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: t}}})
	}
	return out, nil
}

// device finds the volume's disk on this node and, for an encrypted volume, opens it: the
// device to format and mount.
func (n *Node) device(ctx context.Context, volumeID string, volCtx map[string]string) (dev string, diskID int, err error) {
	_, diskID, err = ParseVolumeID(volumeID)
	if err != nil {
		return "", 0, status.Errorf(codes.NotFound, "%v", err)
	}
	raw, err := n.Devices.Find(diskID)
	if errors.Is(err, device.ErrNotAttached) {
		return "", 0, status.Errorf(codes.NotFound, "volume %s: %v", volumeID, err)
	}
	if err != nil {
		return "", 0, status.Errorf(codes.Internal, "volume %s: %v", volumeID, err)
	}
	if volCtx[ctxEncrypted] != "true" {
		return raw, diskID, nil
	}
	dev, err = n.openEncrypted(ctx, raw, diskID, volCtx[ctxWrappedKey])
	return dev, diskID, err
}

// openEncrypted opens (formatting first, when the device is blank) the LUKS2 volume. A
// device with anything else on it is never formatted.
func (n *Node) openEncrypted(ctx context.Context, raw string, diskID int, wrapped string) (string, error) {
	if n.Keys == nil {
		return "", status.Errorf(codes.FailedPrecondition, "disk %d is encrypted but this node has no vault configured (vaultMode external)", diskID)
	}
	if err := n.Crypt.Check(); err != nil {
		return "", status.Errorf(codes.FailedPrecondition, "disk %d is encrypted: %v", diskID, err)
	}
	key, err := n.Keys.Unwrap(ctx, wrapped)
	if err != nil {
		return "", status.Errorf(codes.Unavailable, "disk %d: unwrapping its key: %v", diskID, err)
	}
	defer clear(key)
	isLUKS, err := n.Crypt.IsLUKS(ctx, raw)
	if err != nil {
		return "", status.Errorf(codes.Internal, "disk %d: %v", diskID, err)
	}
	if !isLUKS {
		format, err := n.Mounter.GetDiskFormat(raw)
		if err != nil {
			return "", status.Errorf(codes.Internal, "disk %d: %v", diskID, err)
		}
		if format != "" {
			return "", status.Errorf(codes.FailedPrecondition, "disk %d should be LUKS2 but carries %s: refusing to format it", diskID, format)
		}
		if err := n.Crypt.Format(ctx, raw, key, wrapped); err != nil {
			return "", status.Errorf(codes.Internal, "disk %d: %v", diskID, err)
		}
	}
	dev, err := n.Crypt.Open(ctx, raw, luks.MapperName(diskID), key)
	if err != nil {
		return "", status.Errorf(codes.Internal, "disk %d: %v", diskID, err)
	}
	return dev, nil
}

func fsType(c *csipb.VolumeCapability) string {
	if t := c.GetMount().GetFsType(); t != "" {
		return t
	}
	return "ext4"
}

// NodeStageVolume implements csi.NodeServer: find, open, format once and mount at the staging
// path. A block volume is only found (and opened); it is published as the device itself.
func (n *Node) NodeStageVolume(ctx context.Context, req *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	if req.GetVolumeId() == "" || req.GetStagingTargetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id and staging_target_path are required")
	}
	if err := checkCapabilities([]*csipb.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	if id := req.GetPublishContext()["diskID"]; id != "" {
		if _, disk, err := ParseVolumeID(req.GetVolumeId()); err == nil && strconv.Itoa(disk) != id {
			return nil, status.Errorf(codes.InvalidArgument, "publish_context names disk %s, the volume id disk %d", clipID(id), disk)
		}
	}
	unlock, err := n.locks.try(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	dev, _, err := n.device(ctx, req.GetVolumeId(), req.GetVolumeContext())
	if err != nil {
		return nil, err
	}
	if req.GetVolumeCapability().GetBlock() != nil {
		return &csipb.NodeStageVolumeResponse{}, nil
	}
	target := req.GetStagingTargetPath()
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "staging path: %v", err)
	}
	notMnt, err := mount.IsNotMountPoint(n.Mounter, target)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "staging path: %v", err)
	}
	if !notMnt {
		return &csipb.NodeStageVolumeResponse{}, nil
	}
	if err := n.Mounter.FormatAndMount(dev, target, fsType(req.GetVolumeCapability()), req.GetVolumeCapability().GetMount().GetMountFlags()); err != nil {
		return nil, status.Errorf(codes.Internal, "formatting and mounting %s: %v", dev, err)
	}
	return &csipb.NodeStageVolumeResponse{}, nil
}

// NodeUnstageVolume implements csi.NodeServer.
func (n *Node) NodeUnstageVolume(ctx context.Context, req *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	if req.GetVolumeId() == "" || req.GetStagingTargetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id and staging_target_path are required")
	}
	unlock, err := n.locks.try(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := mount.CleanupMountPoint(req.GetStagingTargetPath(), n.Mounter, true); err != nil {
		return nil, status.Errorf(codes.Internal, "unmounting the staging path: %v", err)
	}
	if _, diskID, err := ParseVolumeID(req.GetVolumeId()); err == nil {
		if err := n.Crypt.Close(ctx, luks.MapperName(diskID)); err != nil {
			return nil, status.Errorf(codes.Internal, "closing the encrypted volume: %v", err)
		}
	}
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

// NodePublishVolume implements csi.NodeServer: a bind mount of the staging path (of the
// device, for a block volume), read-only when asked.
func (n *Node) NodePublishVolume(ctx context.Context, req *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	if req.GetVolumeId() == "" || req.GetTargetPath() == "" || req.GetStagingTargetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id, staging_target_path and target_path are required")
	}
	if err := checkCapabilities([]*csipb.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	unlock, err := n.locks.try(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	opts := []string{"bind"}
	if req.GetReadonly() || req.GetVolumeCapability().GetAccessMode().GetMode() == csipb.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY {
		opts = append(opts, "ro")
	}
	source, target := req.GetStagingTargetPath(), req.GetTargetPath()
	if req.GetVolumeCapability().GetAccessMode().GetMode() == csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER &&
		req.GetVolumeCapability().GetMount() != nil {
		if err := n.singleWriter(source, target); err != nil {
			return nil, err
		}
	}
	if req.GetVolumeCapability().GetBlock() != nil {
		if source, _, err = n.device(ctx, req.GetVolumeId(), req.GetVolumeContext()); err != nil {
			return nil, err
		}
		if err := touch(target); err != nil {
			return nil, err
		}
	} else {
		if notMnt, err := mount.IsNotMountPoint(n.Mounter, source); err != nil || notMnt {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s", req.GetVolumeId(), source)
		}
		opts = append(opts, req.GetVolumeCapability().GetMount().GetMountFlags()...)
		if err := os.MkdirAll(target, 0o750); err != nil {
			return nil, status.Errorf(codes.Internal, "target path: %v", err)
		}
	}
	notMnt, err := mount.IsNotMountPoint(n.Mounter, target)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "target path: %v", err)
	}
	if !notMnt {
		return &csipb.NodePublishVolumeResponse{}, nil
	}
	if err := n.Mounter.Mount(source, target, "", opts); err != nil {
		return nil, status.Errorf(codes.Internal, "bind-mounting %s at %s: %v", source, target, err)
	}
	return &csipb.NodePublishVolumeResponse{}, nil
}

// singleWriter refuses a second target for a SINGLE_NODE_SINGLE_WRITER volume: every other
// mount of the same file system or device is one.
func (n *Node) singleWriter(source, target string) error {
	refs, err := n.Mounter.GetMountRefs(source)
	if err != nil {
		return status.Errorf(codes.Internal, "mounts of %s: %v", source, err)
	}
	for _, r := range refs {
		if r != target && r != source {
			return status.Errorf(codes.FailedPrecondition, "the volume is single-writer and already published at %s", r)
		}
	}
	return nil
}

func touch(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return status.Errorf(codes.Internal, "target path: %v", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o640)
	if err != nil {
		return status.Errorf(codes.Internal, "target path: %v", err)
	}
	return f.Close()
}

// NodeUnpublishVolume implements csi.NodeServer.
func (n *Node) NodeUnpublishVolume(_ context.Context, req *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" || req.GetTargetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id and target_path are required")
	}
	unlock, err := n.locks.try(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := mount.CleanupMountPoint(req.GetTargetPath(), n.Mounter, true); err != nil {
		return nil, status.Errorf(codes.Internal, "unmounting the target path: %v", err)
	}
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats implements csi.NodeServer.
func (n *Node) NodeGetVolumeStats(_ context.Context, req *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	if req.GetVolumeId() == "" || req.GetVolumePath() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id and volume_path are required")
	}
	st, err := os.Stat(req.GetVolumePath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "volume path %s does not exist", req.GetVolumePath())
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume path: %v", err)
	}
	if st.Mode()&os.ModeDevice != 0 || st.Mode().IsRegular() {
		size, err := deviceSize(req.GetVolumePath())
		if err != nil {
			return nil, status.Errorf(codes.Internal, "volume path: %v", err)
		}
		return &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{{Unit: csipb.VolumeUsage_BYTES, Total: size}}}, nil
	}
	notMnt, err := mount.IsNotMountPoint(n.Mounter, req.GetVolumePath())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume path: %v", err)
	}
	if notMnt {
		return nil, status.Errorf(codes.NotFound, "no volume is mounted at %s", req.GetVolumePath())
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(req.GetVolumePath(), &fs); err != nil {
		return nil, status.Errorf(codes.Internal, "statfs: %v", err)
	}
	bs := int64(fs.Bsize)
	return &csipb.NodeGetVolumeStatsResponse{
		Usage: []*csipb.VolumeUsage{
			{Unit: csipb.VolumeUsage_BYTES, Total: int64(fs.Blocks) * bs, Available: int64(fs.Bavail) * bs, Used: int64(fs.Blocks-fs.Bfree) * bs},
			{Unit: csipb.VolumeUsage_INODES, Total: int64(fs.Files), Available: int64(fs.Ffree), Used: int64(fs.Files - fs.Ffree)},
		},
	}, nil
}

func deviceSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return f.Seek(0, 2)
}

// NodeExpandVolume implements csi.NodeServer: grow the open LUKS mapping, then the file system.
func (n *Node) NodeExpandVolume(ctx context.Context, req *csipb.NodeExpandVolumeRequest) (*csipb.NodeExpandVolumeResponse, error) {
	if req.GetVolumeId() == "" || req.GetVolumePath() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id and volume_path are required")
	}
	_, diskID, err := ParseVolumeID(req.GetVolumeId())
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "%v", err)
	}
	if _, err := os.Stat(req.GetVolumePath()); errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "volume path %s does not exist", req.GetVolumePath())
	}
	raw, err := n.Devices.Find(diskID)
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %s: %v", req.GetVolumeId(), err)
	}
	dev := raw
	if mapped := n.Crypt.MappedPath(luks.MapperName(diskID)); exists(mapped) {
		if n.Keys == nil {
			return nil, status.Errorf(codes.FailedPrecondition, "disk %d is encrypted but this node has no vault configured", diskID)
		}
		// NodeExpandVolume carries no volume context: the header keeps the wrapped key.
		wrapped, err := n.Crypt.WrappedKey(ctx, raw)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "%v", err)
		}
		key, err := n.Keys.Unwrap(ctx, wrapped)
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "unwrapping the volume key: %v", err)
		}
		err = n.Crypt.Resize(ctx, luks.MapperName(diskID), key)
		clear(key)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "%v", err)
		}
		dev = mapped
	}
	if req.GetVolumeCapability().GetBlock() == nil {
		if _, err := n.Resizer.Resize(dev, req.GetVolumePath()); err != nil {
			return nil, status.Errorf(codes.Internal, "growing the file system on %s: %v", dev, err)
		}
	}
	size, err := deviceSize(dev)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	return &csipb.NodeExpandVolumeResponse{CapacityBytes: size}, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
