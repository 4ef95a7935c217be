package vcosim

import (
	"net/http"
	"slices"
	"strconv"
)

// DiskSnapshot is a point-in-time copy of one disk.
type DiskSnapshot struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	SizeGiB   int    `json:"size_gib"` // the disk's size when it was taken; a clone gets it
	Created   int64  `json:"created"`
	Automatic bool   `json:"automatic"`
}

func (s *Sim) snapshotRoutes() []*route {
	const base = "/customers/{customer_id}/locations/{location}/disks/{disk_id}"
	return []*route{
		{Route: Route{Method: http.MethodPut, Base: apiBase, Path: base + "/size", Query: []string{"disk_size"}}, handle: s.resizeDisk},
		{Route: Route{Method: http.MethodPut, Base: apiBase, Path: base + "/restore", Query: []string{"reason"}}, handle: s.restoreDisk},
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: base + "/snapshots", Query: []string{"include_automatic"}}, handle: s.listSnapshots},
		{Route: Route{Method: http.MethodPost, Base: apiBase, Path: base + "/snapshots", Query: []string{"snapshot_name", "all_vm_disks"}}, handle: s.takeSnapshot},
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: base + "/snapshots/{snapshot_id}", Query: []string{"all_vm_disks"}}, handle: s.getSnapshot},
		{Route: Route{Method: http.MethodDelete, Base: apiBase, Path: base + "/snapshots/{snapshot_id}"}, handle: s.deleteSnapshot},
		{Route: Route{Method: http.MethodPost, Base: apiBase, Path: base + "/snapshots/{snapshot_id}/clone", Query: []string{"name", "description", "all_vm_disks", "vm_id"}}, handle: s.cloneSnapshot},
		{Route: Route{Method: http.MethodPost, Base: apiBase, Path: base + "/snapshots/{snapshot_id}/rollback", Query: []string{"all_vm_disks"}}, handle: s.rollbackSnapshot},
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: "/customers/{customer_id}/locations/{location}/capacity"}, handle: s.locationCapacity},
	}
}

// liveDisk is diskFor for operations a disk in the recycle bin does not take.
func (s *Sim) liveDisk(c *call, perm string) (*Disk, error) {
	d, err := s.diskFor(c, perm)
	if err != nil {
		return nil, err
	}
	if d.DeletedAt != nil {
		return nil, badRequest("Bad Request: Disk %d is in the recycle bin; restore it first", d.ID)
	}
	return d, nil
}

// resizeDisk grows a disk; the platform cannot shrink one.
func (s *Sim) resizeDisk(c *call) (any, error) {
	d, err := s.liveDisk(c, PermUpdate)
	if err != nil {
		return nil, err
	}
	size := c.reqInt("disk_size")
	if err := c.validation(); err != nil {
		return nil, err
	}
	if size < d.SizeGiB {
		return nil, badRequest("Bad Request: disk_size %d GiB is smaller than the disk (%d GiB); disks cannot shrink", size, d.SizeGiB)
	}
	if size == d.SizeGiB {
		return success(), nil
	}
	if err := s.devices(func(h DiskDevices) error { return h.Resized(d.ID, size) }); err != nil {
		return nil, err
	}
	d.SizeGiB = size
	return success(), nil
}

func (s *Sim) restoreDisk(c *call) (any, error) {
	d, err := s.diskFor(c, PermUpdate)
	if err != nil {
		return nil, err
	}
	_ = c.str("reason")
	if err := c.validation(); err != nil {
		return nil, err
	}
	if d.DeletedAt == nil {
		return nil, badRequest("Bad Request: Disk %d is not deleted", d.ID)
	}
	d.DeletedAt = nil
	return success(), nil
}

func wireSnapshot(sn *DiskSnapshot) map[string]any {
	// The list model types creation_time an integer, the get model a string.
	return map[string]any{"snapshot_name": sn.Name, "snapshot_id": sn.ID, "creation_time": sn.Created, "is_automatic": sn.Automatic}
}

func (s *Sim) listSnapshots(c *call) (any, error) {
	d, err := s.diskFor(c, PermRead)
	if err != nil {
		return nil, err
	}
	auto := c.boolean("include_automatic", false)
	if err := c.validation(); err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, sn := range d.Snapshots {
		if !sn.Automatic || auto {
			out = append(out, wireSnapshot(sn))
		}
	}
	return list(out), nil
}

// takeSnapshot snapshots one disk. all_vm_disks=true would snapshot every disk of its VM in
// the same action; the simulator refuses it rather than pretend.
func (s *Sim) takeSnapshot(c *call) (any, error) {
	d, err := s.liveDisk(c, PermCreate)
	if err != nil {
		return nil, err
	}
	name, all := c.reqStr("snapshot_name"), c.boolean("all_vm_disks", false)
	if err := c.validation(); err != nil {
		return nil, err
	}
	if all {
		return nil, badRequest("Bad Request: the simulator does not model all_vm_disks snapshots")
	}
	sn := &DiskSnapshot{ID: s.st.stringID("snap"), Name: name, SizeGiB: d.SizeGiB, Created: c.now().Unix()}
	if err := s.devices(func(h DiskDevices) error { return h.Snapshotted(d.ID, sn.ID) }); err != nil {
		return nil, err
	}
	d.Snapshots = append(d.Snapshots, sn)
	return sn.ID, nil
}

func (s *Sim) snapshotFor(c *call, perm string) (*Disk, *DiskSnapshot, error) {
	d, err := s.diskFor(c, perm)
	if err != nil {
		return nil, nil, err
	}
	id := c.path("snapshot_id")
	i := slices.IndexFunc(d.Snapshots, func(sn *DiskSnapshot) bool { return sn.ID == id })
	if i < 0 {
		return nil, nil, notFound("NotFound: Snapshot %s of disk %d not found", id, d.ID)
	}
	return d, d.Snapshots[i], nil
}

func (s *Sim) getSnapshot(c *call) (any, error) {
	d, sn, err := s.snapshotFor(c, PermRead)
	if err != nil {
		return nil, err
	}
	_ = c.boolean("all_vm_disks", false)
	if err := c.validation(); err != nil {
		return nil, err
	}
	return map[string]any{"snapshot_name": sn.Name, "creation_time": strconv.FormatInt(sn.Created, 10), "snapshot_id": sn.ID,
		"disks": []map[string]int{{"disk_id": d.ID}}}, nil
}

func (s *Sim) deleteSnapshot(c *call) (any, error) {
	d, sn, err := s.snapshotFor(c, PermDelete)
	if err != nil {
		return nil, err
	}
	if err := s.devices(func(h DiskDevices) error { return h.SnapshotDeleted(d.ID, sn.ID) }); err != nil {
		return nil, err
	}
	d.Snapshots = slices.DeleteFunc(d.Snapshots, func(x *DiskSnapshot) bool { return x == sn })
	return success(), nil
}

// cloneSnapshot makes a new, independent disk of the snapshot's size in the disk's location,
// attached to vm_id when given.
func (s *Sim) cloneSnapshot(c *call) (any, error) {
	d, sn, err := s.snapshotFor(c, PermCreate)
	if err != nil {
		return nil, err
	}
	name, desc := c.reqStr("name"), c.str("description")
	all, vmRaw := c.boolean("all_vm_disks", false), c.str("vm_id")
	if err := c.validation(); err != nil {
		return nil, err
	}
	if all {
		return nil, badRequest("Bad Request: the simulator does not model all_vm_disks clones")
	}
	vm, err := s.attachTarget(d.Customer, d.Location, vmRaw)
	if err != nil {
		return nil, err
	}
	if desc == "" {
		desc = name
	}
	clone := s.newDisk(d.Customer, d.Location, name, desc, "DATA", sn.SizeGiB, d.IOPS, 0)
	err = s.devices(func(h DiskDevices) error { return h.Cloned(d.ID, sn.ID, clone.ID) })
	if err == nil && vm != nil {
		err = s.attach(clone, vm)
	}
	if err != nil {
		delete(s.st.Disks, clone.ID)
		return nil, err
	}
	return list([]map[string]int{{"original_disk_id": d.ID, "new_disk_id": clone.ID}}), nil
}

// rollbackSnapshot puts a snapshot's content back. The disk must not be in use: rolling back
// under a running guest's file system would corrupt it.
func (s *Sim) rollbackSnapshot(c *call) (any, error) {
	d, sn, err := s.snapshotFor(c, PermUpdate)
	if err != nil {
		return nil, err
	}
	if c.boolean("all_vm_disks", false) {
		c.invalid["all_vm_disks"] = "the simulator does not model all_vm_disks rollbacks"
	}
	if err := c.validation(); err != nil {
		return nil, err
	}
	if d.DeletedAt != nil {
		return nil, badRequest("Bad Request: Disk %d is in the recycle bin; restore it first", d.ID)
	}
	if vm := s.st.VMs[d.VMID]; vm != nil && vm.Status == "RUNNING" {
		return nil, conflict("Conflict: Disk %d is attached to running virtual machine %d; stop it or detach the disk first", d.ID, vm.ID)
	}
	if err := s.devices(func(h DiskDevices) error { return h.RolledBack(d.ID, sn.ID) }); err != nil {
		return nil, err
	}
	// The content goes back to the snapshot's, and so does the size it had then.
	d.SizeGiB = sn.SizeGiB
	return nil, nil
}

// Each location's storage pool, in GiB: what its capacity's su counts down from.
const locationStorageGiB = 100 << 10

// locationCapacity answers what the location has left for the customer. Only su (storage,
// in GiB here; the swagger gives no unit) is modelled from the disks; the rest are fixed.
func (s *Sim) locationCapacity(c *call) (any, error) {
	cu, loc, err := c.location(PermRead)
	if err != nil {
		return nil, err
	}
	used := 0
	for _, d := range s.st.Disks {
		if d.Customer == cu.ID && d.Location == loc.Name {
			used += d.SizeGiB // the recycle bin holds space too
		}
	}
	return map[string]int{"cu": 512, "mu": 2048, "su": max(locationStorageGiB-used, 0), "ou": 0, "piu": 16, "vcu": 1024}, nil
}
