package csi

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// StorageClass parameters.
const (
	ParamEncrypted = "encrypted" // "true": LUKS2 with a key wrapped by the cluster's transit key
	ParamIOPS      = "iops"      // the disk's IOPS limit; the platform's default is 2000
)

type parameters struct {
	encrypted bool
	iops      int
}

// parseParameters reads a StorageClass's parameters. Keys the driver does not act on are
// refused, except those the sidecars add (csi.storage.k8s.io/...).
func parseParameters(in map[string]string) (parameters, error) {
	var p parameters
	for k, v := range in {
		switch {
		case strings.HasPrefix(k, "csi.storage.k8s.io/"):
		case k == ParamEncrypted:
			b, err := strconv.ParseBool(v)
			if err != nil {
				return p, status.Errorf(codes.InvalidArgument, "parameter %s=%q is not true or false", k, clipID(v))
			}
			p.encrypted = b
		case k == ParamIOPS:
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1_000_000 {
				return p, status.Errorf(codes.InvalidArgument, "parameter %s=%q is not a number of IOPS between 1 and 1000000", k, clipID(v))
			}
			p.iops = n
		default:
			return p, status.Errorf(codes.InvalidArgument, "unknown parameter %q: the driver takes %s and %s (docs/capvco/storage.md)", clipID(k), ParamEncrypted, ParamIOPS)
		}
	}
	return p, nil
}

// checkName accepts a CSI name the disk marker can carry.
func checkName(name string) error {
	if name == "" {
		return status.Error(codes.InvalidArgument, "name is empty")
	}
	if len(name) > 128 || strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) || r == '@' }) >= 0 {
		return status.Errorf(codes.InvalidArgument, "name %q: at most 128 printable characters, no spaces or @", clipID(name))
	}
	return nil
}

// checkCapabilities accepts filesystem and block volumes on one node at a time.
func checkCapabilities(caps []*csipb.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "volume_capabilities are required")
	}
	for _, c := range caps {
		if c == nil {
			return status.Error(codes.InvalidArgument, "volume_capability is required")
		}
		if c.GetMount() == nil && c.GetBlock() == nil {
			return status.Error(codes.InvalidArgument, "volume_capability: access_type must be mount or block")
		}
		if m := c.GetMount(); m != nil && m.FsType != "" && m.FsType != "ext4" && m.FsType != "xfs" {
			return status.Errorf(codes.InvalidArgument, "fs_type %q: the driver formats ext4 or xfs", clipID(m.FsType))
		}
		switch c.GetAccessMode().GetMode() {
		case csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, csipb.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
			csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER, csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:
		case csipb.VolumeCapability_AccessMode_UNKNOWN:
			return status.Error(codes.InvalidArgument, "volume_capability: access_mode is required")
		default:
			return status.Errorf(codes.InvalidArgument, "access mode %s: a disk attaches to one VM at a time", c.GetAccessMode().GetMode())
		}
	}
	return nil
}

// snapshotName is the platform name of a snapshot: the CSI name and the disk's size when it
// was taken, which the platform does not report and a restore needs.
func snapshotName(csiName string, sizeGiB int) string {
	return fmt.Sprintf("%s@%dGiB", csiName, sizeGiB)
}

// parseSnapshotName is the inverse of snapshotName; a name of another form is no snapshot of
// this driver's (size 0).
func parseSnapshotName(s string) (csiName string, sizeGiB int) {
	i := strings.LastIndex(s, "@")
	if i <= 0 {
		return "", 0
	}
	num, ok := strings.CutSuffix(s[i+1:], "GiB")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n <= 0 || strconv.Itoa(n) != num {
		return "", 0
	}
	return s[:i], n
}
