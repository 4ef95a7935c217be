package vcosim

import (
	"net/http"
	"strconv"
)

func (s *Sim) diskRoutes() []*route {
	const base = "/customers/{customer_id}/locations/{location}/disks"
	return append([]*route{
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: base, Query: []string{"include_deleted", "only_deleted"}}, handle: s.listDisks},
		{Route: Route{Method: http.MethodPost, Base: apiBase, Path: base, Query: []string{"disk_name", "description", "disk_size", "iops", "disk_type", "vm_id", "raid_level", "backup_size_limit"}}, handle: s.createDisk},
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: base + "/{disk_id}"}, handle: s.getDisk},
		{Route: Route{Method: http.MethodDelete, Base: apiBase, Path: base + "/{disk_id}", Query: []string{"detach", "permanently"}}, handle: s.deleteDisk},
	}, s.snapshotRoutes()...)
}

func (s *Sim) newDisk(customer, location, name, desc, typ string, size, iops, vmID int) *Disk {
	d := &Disk{ID: s.st.intID(), Customer: customer, Location: location, Name: name, Description: desc, Type: typ, SizeGiB: size, IOPS: iops, VMID: vmID}
	if vmID != 0 {
		for _, other := range s.st.Disks {
			if other.VMID == vmID && other.DeletedAt == nil {
				d.Order++
			}
		}
	}
	s.st.Disks[d.ID] = d
	return d
}

func diskStatus(d *Disk) string {
	switch {
	case d.DeletedAt != nil:
		return statusDeleted
	case d.VMID != 0:
		return "ASSIGNED"
	}
	return "CREATED"
}

// createDisk is location-scoped: a cloudspace grant is not enough (the platform's genuine
// 403 for a cloudspace-scoped CSI credential).
func (s *Sim) createDisk(c *call) (any, error) {
	cu, loc, err := c.location(PermCreate)
	if err != nil {
		return nil, err
	}
	name, desc, size := c.reqStr("disk_name"), c.reqStr("description"), c.reqInt("disk_size")
	iops, typ := c.int("iops", 2000), c.str("disk_type")
	vmRaw := c.str("vm_id")
	_, _ = c.str("raid_level"), c.str("backup_size_limit")
	if err := c.validation(); err != nil {
		return nil, err
	}
	if typ == "" {
		typ = "DATA"
	}
	if typ != "DATA" && typ != "BOOT" && typ != "PHYSICAL" {
		return nil, badRequest("Bad Request: disk_type must be DATA, BOOT or PHYSICAL")
	}
	if size <= 0 {
		return nil, badRequest("Bad Request: disk_size must be a positive number of GiB")
	}
	vm, err := s.attachTarget(cu.ID, loc.Name, vmRaw)
	if err != nil {
		return nil, err
	}
	d := s.newDisk(cu.ID, loc.Name, name, desc, typ, size, iops, 0)
	err = s.devices(func(h DiskDevices) error { return h.Created(d.ID, d.SizeGiB) })
	if err == nil && vm != nil {
		err = s.attach(d, vm)
	}
	if err != nil {
		delete(s.st.Disks, d.ID)
		return nil, err
	}
	c.slow(s.delays.DiskCreate)
	return map[string]int{"disk_id": d.ID}, nil
}

// attachTarget resolves the optional vm_id of a create or clone: a live VM of the customer in
// the disk's location.
func (s *Sim) attachTarget(customer, location, vmRaw string) (*VM, error) {
	if vmRaw == "" {
		return nil, nil
	}
	id, err := strconv.Atoi(vmRaw)
	vm := s.st.VMs[id]
	if err != nil || vm == nil || vm.Customer != customer || vm.Status == statusDestroyed || vm.Status == statusDeleted {
		return nil, notFound("NotFound: Virtual machine %s not found", vmRaw)
	}
	if s.st.Cloudspaces[vm.CloudspaceID].Location != location {
		return nil, badRequest("Bad Request: Virtual machine %d is not in location %s", id, location)
	}
	return vm, nil
}

// attach puts a free disk on a VM, within the VM's disk limit, and shows it to the VM.
func (s *Sim) attach(d *Disk, vm *VM) error {
	if err := s.checkAttachLimit(vm); err != nil {
		return err
	}
	if err := s.devices(func(h DiskDevices) error { return h.Attached(d.ID, vm.ID) }); err != nil {
		return err
	}
	d.VMID, d.Order = vm.ID, len(s.vmDisks(vm))
	return nil
}

// detach takes a disk off its VM.
func (s *Sim) detach(d *Disk) error {
	if d.VMID == 0 {
		return nil
	}
	if err := s.devices(func(h DiskDevices) error { return h.Detached(d.ID, d.VMID) }); err != nil {
		return err
	}
	d.VMID = 0
	return nil
}

func (s *Sim) diskFor(c *call, perm string) (*Disk, error) {
	cu, err := c.customer()
	if err != nil {
		return nil, err
	}
	id, err := c.pathInt("disk_id")
	if err != nil {
		return nil, err
	}
	loc := c.path("location")
	d := s.st.Disks[id]
	if d == nil || d.Customer != cu.ID || d.Location != loc {
		// Whoever may read the location's disks may learn that one is not there.
		if c.principal.customerWide() || c.principal.can(PermRead, resource{location: loc}) {
			return nil, notFound("NotFound: Disk %d not found", id)
		}
		return nil, forbidden("Forbidden: access denied: %s permission on disk %d is not granted to this credential", perm, id)
	}
	if err := c.allow(perm, resource{location: loc, disk: id}); err != nil {
		return nil, err
	}
	return d, nil
}

func (s *Sim) diskOwner(d *Disk) (vmID *int, vmName, csID *string) {
	vm := s.st.VMs[d.VMID]
	if vm == nil {
		return nil, nil, nil
	}
	return &vm.ID, &vm.Name, &vm.CloudspaceID
}

func (s *Sim) listDisks(c *call) (any, error) {
	cu, loc, err := c.location(PermRead)
	if err != nil {
		return nil, err
	}
	includeDeleted, onlyDeleted := c.boolean("include_deleted", false), c.boolean("only_deleted", false)
	if err := c.validation(); err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, d := range sortedValues(s.st.Disks) {
		deleted := d.DeletedAt != nil
		if d.Customer != cu.ID || d.Location != loc.Name || (deleted && !includeDeleted && !onlyDeleted) || (onlyDeleted && !deleted) {
			continue
		}
		vmID, vmName, csID := s.diskOwner(d)
		out = append(out, map[string]any{
			"status": diskStatus(d), "disk_size": d.SizeGiB, "disk_name": d.Name, "description": d.Description,
			"deletion_time": unixString(d.DeletedAt), "exposed": false, "disk_id": d.ID, "disk_type": d.Type,
			"order": strconv.Itoa(d.Order), "port": nil, "vm_id": vmID, "vm_name": vmName, "cloudspace_id": csID,
			"iotune": map[string]int{"iops": d.IOPS}, "backup_blocksize": nil,
		})
	}
	return list(out), nil
}

func (s *Sim) getDisk(c *call) (any, error) {
	d, err := s.diskFor(c, PermRead)
	if err != nil {
		return nil, err
	}
	vmID, _, csID := s.diskOwner(d)
	return map[string]any{
		"status": diskStatus(d), "disk_size": d.SizeGiB, "disk_name": d.Name, "description": d.Description, "exposed": false,
		"disk_id": d.ID, "disk_type": d.Type, "order": strconv.Itoa(d.Order), "vm_id": vmID, "port": nil, "model": "virtio",
		"iotune": map[string]int{"iops": d.IOPS}, "cache": nil, "backup_blocksize": nil, "cloudspace_id": csID, "backup_snapshot_ratio": nil,
	}, nil
}

func (s *Sim) deleteDisk(c *call) (any, error) {
	d, err := s.diskFor(c, PermDelete)
	if err != nil {
		return nil, err
	}
	detach, permanently := c.boolean("detach", true), c.boolean("permanently", false)
	if err := c.validation(); err != nil {
		return nil, err
	}
	if vm := s.st.VMs[d.VMID]; vm != nil {
		if vm.BootDiskID == d.ID && vm.Status != statusDestroyed {
			return nil, badRequest("Bad Request: Disk %d is the boot disk of virtual machine %d", d.ID, vm.ID)
		}
		if !detach {
			return nil, conflict("Conflict: Disk %d is attached to virtual machine %d; pass detach=true", d.ID, vm.ID)
		}
	}
	if err := s.detach(d); err != nil {
		return nil, err
	}
	if permanently {
		if err := s.devices(func(h DiskDevices) error { return h.Deleted(d.ID) }); err != nil {
			return nil, err
		}
		delete(s.st.Disks, d.ID)
		return success(), nil
	}
	now := c.now().Unix()
	d.DeletedAt = &now
	return success(), nil
}
