package vcosim

// DiskDevices is told what happens to the content of disks, so that a test harness can back
// simulated disks with real block devices: on the platform an attached disk appears in the
// VM as a block device, and the simulator has no VM to show it in. The simulator calls it with
// its lock held, before the call answers, so a device is there (or gone) when the API says so.
// An error fails the API call with a 500 and leaves the disk as it was.
type DiskDevices interface {
	// Created gives a new, empty disk of sizeGiB its content.
	Created(diskID, sizeGiB int) error
	// Attached shows the disk to the VM; detached hides it again.
	Attached(diskID, vmID int) error
	Detached(diskID, vmID int) error
	// Resized grows the disk's content (and an attached disk's device) to sizeGiB.
	Resized(diskID, sizeGiB int) error
	// Snapshotted keeps the disk's content as the snapshot; Cloned makes a new disk of it;
	// RolledBack puts it back into the disk; SnapshotDeleted drops it.
	Snapshotted(diskID int, snapshotID string) error
	Cloned(diskID int, snapshotID string, newDiskID int) error
	RolledBack(diskID int, snapshotID string) error
	SnapshotDeleted(diskID int, snapshotID string) error
	// Deleted drops the disk's content for good (a permanent delete).
	Deleted(diskID int) error
}

// SetDiskDevices installs the harness that backs disks with devices (nil removes it). Disks
// that exist already have no content until they are created again.
func (s *Sim) SetDiskDevices(d DiskDevices) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.diskDevices = d
}

// devices runs f against the harness, if there is one, turning its failure into the 500 the
// platform answers when its storage backend fails.
func (s *Sim) devices(f func(DiskDevices) error) error {
	if s.diskDevices == nil {
		return nil
	}
	if err := f(s.diskDevices); err != nil {
		return errf(500, "Exception: storage backend: %v", err)
	}
	return nil
}

// DefaultMaxVMDisks is the simulator's attach limit per VM, the boot disk included: a VM
// has 32 PCI slots and its NICs, controllers and boot disk take some of them.
const DefaultMaxVMDisks = 16

func (s *Sim) maxVMDisks() int {
	if s.opts.MaxVMDisks > 0 {
		return s.opts.MaxVMDisks
	}
	return DefaultMaxVMDisks
}

// checkAttachLimit refuses a further disk on a VM that has the maximum.
func (s *Sim) checkAttachLimit(vm *VM) error {
	if n := len(s.vmDisks(vm)); n >= s.maxVMDisks() {
		return badRequest("Bad Request: virtual machine %d has %d disks, the maximum", vm.ID, n)
	}
	return nil
}
