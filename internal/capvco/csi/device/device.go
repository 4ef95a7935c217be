// Package device finds the block device of an attached disk by the identity the platform
// gives it, never by guessing a name such as /dev/vdb: device names follow attach order and
// change across reboots and detaches, and a wrong guess formats someone else's data.
package device

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// ByIDDir is where udev links disks by their serial on a real node.
const ByIDDir = "/dev/disk/by-id"

// Finder looks disks up in a directory of by-id links: /dev/disk/by-id on a node; a test
// harness points it at a directory of links to loop devices it made for attached disks.
type Finder struct {
	Dir string
}

// ErrNotAttached means no link for the disk exists (yet): the attach has not reached the
// guest, or the disk is attached to another VM.
var ErrNotAttached = errors.New("no block device with the disk's serial is present on this node")

// Names are the by-id link names a disk with this serial gets: virtio-blk links the serial
// as virtio-<serial>, virtio-scsi (QEMU) as scsi-0QEMU_QEMU_HARDDISK_<serial>. The platform's
// serial for a disk is its disk id.
func Names(diskID int) []string {
	s := strconv.Itoa(diskID)
	return []string{"virtio-" + s, "scsi-0QEMU_QEMU_HARDDISK_" + s}
}

// Find returns the device node of the disk, e.g. /dev/vdc.
func (f Finder) Find(diskID int) (string, error) {
	dir := f.Dir
	if dir == "" {
		dir = ByIDDir
	}
	for _, n := range Names(diskID) {
		link := filepath.Join(dir, n)
		dev, err := filepath.EvalSymlinks(link)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("disk %d: %s: %w", diskID, link, err)
		}
		st, err := os.Stat(dev)
		if err != nil {
			return "", fmt.Errorf("disk %d: %s -> %s: %w", diskID, link, dev, err)
		}
		if st.Mode()&os.ModeDevice == 0 || st.Mode()&os.ModeCharDevice != 0 {
			return "", fmt.Errorf("disk %d: %s -> %s is not a block device", diskID, link, dev)
		}
		return dev, nil
	}
	return "", fmt.Errorf("disk %d: %w (looked for %v in %s)", diskID, ErrNotAttached, Names(diskID), dir)
}
