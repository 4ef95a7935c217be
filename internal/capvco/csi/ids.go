package csi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/capx-io/capx/internal/capvco/csi/transit"
)

// A volume id is <location>/<disk id>: the disk API is location-scoped, so every call needs
// both. A snapshot id is <location>/<disk id>/<snapshot id>: snapshots hang off their disk.

// VolumeID names a disk.
func VolumeID(location string, diskID int) string { return location + "/" + strconv.Itoa(diskID) }

// ParseVolumeID is the inverse of VolumeID.
func ParseVolumeID(id string) (location string, diskID int, err error) {
	loc, num, ok := strings.Cut(id, "/")
	if !ok || !validLocation(loc) {
		return "", 0, fmt.Errorf("volume id %q is not <location>/<disk id>", clipID(id))
	}
	n, err := positive(num)
	if err != nil {
		return "", 0, fmt.Errorf("volume id %q: %w", clipID(id), err)
	}
	return loc, n, nil
}

// SnapshotID names a snapshot of a disk.
func SnapshotID(location string, diskID int, snapshotID string) string {
	return VolumeID(location, diskID) + "/" + snapshotID
}

// ParseSnapshotID is the inverse of SnapshotID.
func ParseSnapshotID(id string) (location string, diskID int, snapshotID string, err error) {
	vol, snap, ok := cutLast(id, "/")
	if !ok || snap == "" || strings.ContainsAny(snap, "?#% \t\n") {
		return "", 0, "", fmt.Errorf("snapshot id %q is not <location>/<disk id>/<snapshot id>", clipID(id))
	}
	loc, disk, err := ParseVolumeID(vol)
	if err != nil {
		return "", 0, "", fmt.Errorf("snapshot id %q is not <location>/<disk id>/<snapshot id>", clipID(id))
	}
	return loc, disk, snap, nil
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

func validLocation(s string) bool {
	return s != "" && len(s) <= 64 && !strings.ContainsAny(s, "/?#% \t\n")
}

func positive(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || strconv.Itoa(n) != s {
		return 0, errors.New("the disk id is not a positive number")
	}
	return n, nil
}

// clipID keeps ids from untrusted requests short in messages.
func clipID(s string) string {
	if len(s) > 140 {
		return s[:140] + "..."
	}
	return s
}

// marker is what the driver writes into a disk's description: which cluster owns the disk,
// the CSI name it was created under, and, for an encrypted volume, its wrapped key. The
// platform has no labels on disks; the description is the one free field every disk read
// returns, and a disk without this cluster's marker is never touched.
type marker struct {
	Cluster    string // namespace/name
	Name       string // the CSI volume name
	WrappedKey string // transit ciphertext; empty for a plain volume
}

const markerPrefix = "capvco-csi/v1"

func (m marker) String() string {
	s := markerPrefix + " cluster=" + m.Cluster + " name=" + m.Name
	if m.WrappedKey != "" {
		s += " key=" + m.WrappedKey
	}
	return s
}

// errNoMarker means the description is not the driver's: the disk is someone else's.
var errNoMarker = errors.New("the disk's description carries no capvco-csi marker")

// parseMarker reads a description. Any disk of the location can be read, so the text is
// untrusted: every field is checked.
func parseMarker(desc string) (marker, error) {
	fields := strings.Fields(desc)
	if len(fields) == 0 || fields[0] != markerPrefix {
		return marker{}, errNoMarker
	}
	var m marker
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || v == "" {
			return marker{}, fmt.Errorf("disk description: field %q is not key=value", clipID(f))
		}
		switch k {
		case "cluster":
			m.Cluster = v
		case "name":
			m.Name = v
		case "key":
			if err := transit.CheckWrapped(v); err != nil {
				return marker{}, fmt.Errorf("disk description: %w", err)
			}
			m.WrappedKey = v
		default:
			return marker{}, fmt.Errorf("disk description: unknown field %q", clipID(k))
		}
	}
	if m.Cluster == "" || m.Name == "" {
		return marker{}, errors.New("disk description: the marker names no cluster or no volume name")
	}
	return m, nil
}
