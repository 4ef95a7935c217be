package vcosim

import (
	"fmt"
	"net/http"
	"sigs.k8s.io/yaml"
	"slices"
	"strconv"
	"strings"
)

func (s *Sim) vmRoutes() []*route {
	const base = "/customers/{customer_id}/cloudspaces/{cloudspace_id}/vms"
	post, get, del := http.MethodPost, http.MethodGet, http.MethodDelete
	return []*route{
		{Route: Route{Method: get, Base: apiBase, Path: base, Query: []string{"include_deleted", "only_deleted", "include_connected", "exclude_internal"}}, handle: s.listVMs},
		{Route: Route{Method: post, Base: apiBase, Path: base, Body: true, Query: []string{
			"name", "hostname", "description", "data_disks", "vcpus", "memory", "private_ip", "user_data", "start_vm", "tpm_secret",
			"image_id", "disk_size", "cdrom_id", "boot_disk_id", "os_type", "os_name", "enable_vm_agent", "snapshot_id",
			"all_vm_disks", "acronis", "veeam", "boot_type"}}, handle: s.createVM},
		{Route: Route{Method: get, Base: apiBase, Path: base + "/{vm_id}"}, handle: s.getVM},
		{Route: Route{Method: del, Base: apiBase, Path: base + "/{vm_id}", Query: []string{"permanently", "detach_disks", "detach_gpu"}}, handle: s.deleteVM},
		{Route: Route{Method: post, Base: apiBase, Path: base + "/{vm_id}/start", Query: []string{"rescue_disk_id", "tpm_secret"}}, handle: s.startVM},
		{Route: Route{Method: post, Base: apiBase, Path: base + "/{vm_id}/stop", Query: []string{"force"}}, handle: s.stopVM},
		{Route: Route{Method: get, Base: apiBase, Path: base + "/{vm_id}/disks"}, handle: s.listVMDisks},
		{Route: Route{Method: post, Base: apiBase, Path: base + "/{vm_id}/disks", Query: []string{"disk_id"}}, handle: s.attachDisk},
		{Route: Route{Method: del, Base: apiBase, Path: base + "/{vm_id}/disks/{disk_id}"}, handle: s.detachDisk},
	}
}

// wireVMCreateBody is VMCreateExtentions, plus the body key user_data (a string) that the
// Pulumi client sends although the model does not declare it.
type wireVMCreateBody struct {
	UserData       map[string]any `json:"userdata"`
	UserDataParams map[string]any `json:"UserDataParameters"`
	GPUID          string         `json:"gpu_id"`
	VGPUName       string         `json:"vgpu_name"`
	UserDataString string         `json:"user_data"`
}

func (s *Sim) createVM(c *call) (any, error) {
	cs, err := c.cloudspace(PermCreate)
	if err != nil {
		return nil, err
	}
	vm := &VM{
		Customer: cs.Customer, CloudspaceID: cs.ID, Name: c.reqStr("name"), Description: c.reqStr("description"),
		Hostname: c.str("hostname"), VCPUs: c.reqInt("vcpus"), MemoryMiB: c.reqInt("memory"), UserData: c.str("user_data"),
		ImageID: c.int("image_id", 0), BootType: c.str("boot_type"), AgentEnabled: c.boolean("enable_vm_agent", true),
	}
	start := c.boolean("start_vm", true)
	dataDisks := c.ints("data_disks")
	diskSize := c.int("disk_size", 0)
	bootDiskID, cdromID := c.int("boot_disk_id", 0), c.int("cdrom_id", 0)
	privateIP := c.str("private_ip")
	for _, ignored := range []string{"tpm_secret", "os_type", "os_name", "snapshot_id"} {
		_ = c.str(ignored)
	}
	for _, ignored := range []string{"all_vm_disks", "acronis", "veeam"} {
		_ = c.boolean(ignored, false)
	}
	var body wireVMCreateBody
	if err := c.decode(&body); err != nil {
		return nil, err
	}
	if err := c.validation(); err != nil {
		return nil, err
	}
	// user_data precedence is unknown (reference/vco-api.md §6.13): the documented query
	// argument wins, then the body's user_data string, then the body's userdata object.
	if vm.UserData == "" && body.UserDataString != "" {
		vm.UserData = body.UserDataString
	}
	if vm.UserData == "" && len(body.UserData) > 0 {
		// The object is cloud-init config as JSON: keep it as the cloud-config YAML a guest
		// reads. The swagger's default, {}, is no user data at all.
		y, err := yaml.Marshal(body.UserData)
		if err != nil {
			return nil, &apiError{status: http.StatusBadRequest, message: "Input payload validation failed",
				fields: map[string]string{"userdata": "cannot be written as cloud-config YAML"}}
		}
		vm.UserData = "#cloud-config\n" + string(y)
	}
	if cs.Status != statusDeployed {
		return nil, badRequest("Bad Request: Cloudspace %s is not deployed (status %s)", cs.ID, cs.Status)
	}
	if vm.VCPUs <= 0 || vm.MemoryMiB < 128 {
		return nil, badRequest("Bad Request: vcpus must be positive and memory at least 128 MiB (memory is in MiB)")
	}
	if err := s.checkQuota(cs, vm); err != nil {
		return nil, err
	}
	if vm.ImageID == 0 && bootDiskID == 0 && cdromID == 0 {
		return nil, badRequest("Bad Request: one of image_id, cdrom_id or boot_disk_id is required")
	}
	bootSize := diskSize
	if vm.ImageID != 0 {
		img := s.st.Images[vm.ImageID]
		if img == nil || img.Location != cs.Location || img.DeletedAt != nil || (!img.Public && img.Customer != cs.Customer) {
			return nil, notFound("NotFound: Image %d does not exist in location %s", vm.ImageID, cs.Location)
		}
		if bootSize == 0 {
			bootSize = img.BootDiskSize
		}
		if bootSize < img.BootDiskSize {
			return nil, badRequest("Bad Request: disk_size %d GiB is smaller than the image's boot disk (%d GiB)", bootSize, img.BootDiskSize)
		}
		if vm.BootType == "" {
			vm.BootType = img.BootType
		}
	}
	if vm.BootType == "" {
		vm.BootType = "bios"
	}
	if privateIP == "" {
		privateIP = s.nextPrivateIP(cs)
	} else if err := s.checkPrivateIP(cs, privateIP); err != nil {
		return nil, err
	}
	var profile *GPUProfile
	if body.GPUID != "" {
		if profile, err = s.gpuProfile(cs.Location, body.GPUID); err != nil {
			return nil, err
		}
	}
	vm.ID = s.st.intID()
	vm.PrivateIP = privateIP
	vm.MAC = fmt.Sprintf("52:54:00:%02x:%02x:%02x", vm.ID>>16&0xff, vm.ID>>8&0xff, vm.ID&0xff)
	vm.Status = statusDeploying
	vm.Created = float64(c.now().UnixMilli()) / 1000
	vm.Updated = vm.Created
	if vm.Hostname == "" {
		vm.Hostname = vm.Name
	}
	if bootDiskID != 0 {
		d := s.st.Disks[bootDiskID]
		if d == nil || d.Location != cs.Location || d.DeletedAt != nil || d.VMID != 0 {
			return nil, badRequest("Bad Request: boot_disk_id %d is not a free disk in location %s", bootDiskID, cs.Location)
		}
		d.VMID, d.Type = vm.ID, "BOOT"
		vm.BootDiskID = d.ID
	} else {
		vm.BootDiskID = s.newDisk(cs.Customer, cs.Location, "boot disk", "Boot disk of "+vm.Name, "BOOT", bootSize, 2000, vm.ID).ID
	}
	for i, size := range dataDisks {
		s.newDisk(cs.Customer, cs.Location, fmt.Sprintf("data disk %d", i+1), "Data disk of "+vm.Name, "DATA", size, 2000, vm.ID)
	}
	s.st.VMs[vm.ID] = vm
	if profile != nil {
		s.reserve(cs.Customer, cs.Location, profile, body.VGPUName, vm.ID, c.now().Unix())
	}
	c.slow(s.delays.VMCreate)
	if vm.Status == statusDeploying {
		vm.Status = statusHalted
		if start {
			vm.Status = statusRunning
			s.vmRunning(vm)
		}
	}
	return map[string]int{"vm_id": vm.ID}, nil
}

func (s *Sim) checkQuota(cs *Cloudspace, add *VM) error {
	vcpus, mem := add.VCPUs, add.MemoryMiB
	for _, vm := range s.st.vmsIn(cs.ID) {
		if vm.Status != statusDestroyed {
			vcpus += vm.VCPUs
			mem += vm.MemoryMiB
		}
	}
	if cs.Quota[0] >= 0 && vcpus > cs.Quota[0] {
		return badRequest("Bad Request: ResourceLimitExceededError: vcpu quota of cloudspace %s exceeded (%d > %d)", cs.ID, vcpus, cs.Quota[0])
	}
	if cs.Quota[1] >= 0 && mem > cs.Quota[1]*1024 {
		return badRequest("Bad Request: ResourceLimitExceededError: memory quota of cloudspace %s exceeded", cs.ID)
	}
	return nil
}

// privatePrefix is the first three octets of the cloudspace network (a /24 is assumed).
func privatePrefix(cs *Cloudspace) string {
	ip, _, _ := strings.Cut(cs.PrivateNetwork, "/")
	return ip[:strings.LastIndex(ip, ".")]
}

func (s *Sim) nextPrivateIP(cs *Cloudspace) string {
	used := map[string]bool{}
	for _, vm := range s.st.vmsIn(cs.ID) {
		used[vm.PrivateIP] = true
	}
	for {
		cs.NextHost++
		if cs.NextHost > 250 {
			cs.NextHost = 11
		}
		ip := fmt.Sprintf("%s.%d", privatePrefix(cs), cs.NextHost)
		if !used[ip] {
			return ip
		}
	}
}

func (s *Sim) checkPrivateIP(cs *Cloudspace, ip string) error {
	if !strings.HasPrefix(ip, privatePrefix(cs)+".") {
		return badRequest("Bad Request: private_ip %s is not in the cloudspace network %s", ip, cs.PrivateNetwork)
	}
	for _, vm := range s.st.vmsIn(cs.ID) {
		if vm.PrivateIP == ip && vm.Status != statusDestroyed {
			return conflict("Conflict: private_ip %s is already used by vm %d", ip, vm.ID)
		}
	}
	return nil
}

func (s *Sim) vmDisks(vm *VM) []*Disk {
	var out []*Disk
	for _, d := range sortedValues(s.st.Disks) {
		if d.VMID == vm.ID && d.DeletedAt == nil {
			out = append(out, d)
		}
	}
	return out
}

func (s *Sim) vmVGPUs(vm *VM) []*VGPU {
	var out []*VGPU
	for _, id := range s.st.VGPUOrder {
		if v := s.st.VGPUs[id]; v != nil && v.VMID == vm.ID && v.DeletedAt == nil {
			out = append(out, v)
		}
	}
	return out
}

func (s *Sim) vmStorage(vm *VM) int {
	total := 0
	for _, d := range s.vmDisks(vm) {
		total += d.SizeGiB
	}
	return total
}

func (s *Sim) vmDevices(vm *VM) []map[string]any {
	out := []map[string]any{}
	for _, v := range s.vmVGPUs(vm) {
		out = append(out, map[string]any{"reference_id": v.ID, "type": "VGPU", "description": s.gpuDescription(v)})
	}
	return out
}

func (s *Sim) listVMs(c *call) (any, error) {
	cs, err := c.cloudspace(PermRead)
	if err != nil {
		return nil, err
	}
	includeDeleted, onlyDeleted := c.boolean("include_deleted", false), c.boolean("only_deleted", false)
	_, _ = c.boolean("include_connected", false), c.boolean("exclude_internal", false)
	if err := c.validation(); err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, vm := range s.st.vmsIn(cs.ID) {
		deleted := vm.Status == statusDeleted
		if vm.Status == statusDestroyed || (deleted && !includeDeleted && !onlyDeleted) || (onlyDeleted && !deleted) {
			continue
		}
		disks := []int{}
		for _, d := range s.vmDisks(vm) {
			disks = append(disks, d.ID)
		}
		var del *int64
		if vm.DeletedAt != nil {
			d := int64(*vm.DeletedAt)
			del = &d
		}
		out = append(out, map[string]any{
			// cloudspace_id is declared integer in this model but is a string id everywhere
			// else; the simulator emits the string (documented gap in the conformance test).
			"vm_id": vm.ID, "name": vm.Name, "cloudspace_id": vm.CloudspaceID, "status": vm.Status, "deletion_time": unixString(del),
			"stack_id": 1, "creation_time": vm.Created, "update_time": vm.Updated, "reference_id": fmt.Sprintf("vm-%d", vm.ID),
			"image_id": nullableInt(vm.ImageID), "storage": s.vmStorage(vm), "vcpus": vm.VCPUs, "memory": vm.MemoryMiB,
			"appliance": false, "disks": disks, "tpm_enabled": false, "backup_status": nil,
			"network_interfaces": []map[string]any{{"device_name": "eth0", "mac_address": vm.MAC, "ip_address": vm.PrivateIP,
				"network_id": 0, "model": "virtio", "external_network_type": nil, "external_cloudspace_id": nil}},
			"devices": s.vmDevices(vm),
		})
	}
	return list(out), nil
}

func nullableInt(v int) *int {
	if v == 0 {
		return nil
	}
	return &v
}

func (s *Sim) wireVMDisk(d *Disk) map[string]any {
	return map[string]any{"status": diskStatus(d), "disk_size": d.SizeGiB, "disk_name": d.Name, "description": d.Description,
		"exposed": false, "pci_bus": 0, "pci_slot": d.Order + 5, "disk_id": d.ID, "disk_type": d.Type, "order": strconv.Itoa(d.Order)}
}

func (s *Sim) getVM(c *call) (any, error) {
	_, vm, err := c.vm(PermRead)
	if err != nil {
		return nil, err
	}
	disks := []map[string]any{}
	for _, d := range s.vmDisks(vm) {
		disks = append(disks, s.wireVMDisk(d))
	}
	groups := []string{}
	for _, g := range sortedValues(s.st.AntiAffinity) {
		if g.CloudspaceID == vm.CloudspaceID && slices.Contains(g.VMs, vm.ID) {
			groups = append(groups, g.ID)
		}
	}
	osImage := ""
	if img := s.st.Images[vm.ImageID]; img != nil {
		osImage = img.Name
	}
	agent := "NOT_RUNNING"
	if vm.AgentEnabled && vm.Status == statusRunning {
		agent = "RUNNING"
	}
	return map[string]any{
		"backup_policies": []any{}, "name": vm.Name, "vm_id": vm.ID, "description": vm.Description, "boot_disk_id": vm.BootDiskID,
		"cloudspace_id": vm.CloudspaceID, "status": vm.Status, "update_time": vm.Updated, "creation_time": vm.Created,
		"vcpus": vm.VCPUs, "storage": s.vmStorage(vm), "memory": vm.MemoryMiB, "agent_status": agent, "image_id": nullableInt(vm.ImageID),
		"locked": false, "stack_id": 1, "impact_alert_hook": nil, "os_image_name": nullable(osImage), "hostname": vm.Hostname,
		"anti_affinity_group_ids": groups, "disks": disks, "os_accounts": []any{},
		"network_interfaces": []map[string]any{{"device_name": "eth0", "mac_address": vm.MAC, "ip_address": vm.PrivateIP,
			"network_id": 0, "nic_type": "INTERNAL", "model": "virtio", "external_cloudspace_id": nil}},
		"appliance": false, "cpus_pin_status": false, "boot_type": vm.BootType,
		"cpu_topology": map[string]int{"cores": vm.VCPUs, "threads": 1, "sockets": 1}, "devices": s.vmDevices(vm), "tpm_enabled": false,
	}, nil
}

func (s *Sim) startVM(c *call) (any, error) {
	_, vm, err := c.vm(PermExecute)
	if err != nil {
		return nil, err
	}
	_, _ = c.int("rescue_disk_id", 0), c.str("tpm_secret")
	if err := c.validation(); err != nil {
		return nil, err
	}
	if vm.Status == statusDeleted {
		return nil, badRequest("Bad Request: Virtual machine %d is deleted", vm.ID)
	}
	if vm.Status != statusRunning { // starting a running VM is a no-op, as on the platform
		vm.Status = statusRunning
		s.vmRunning(vm)
	}
	return success(), nil
}

func (s *Sim) stopVM(c *call) (any, error) {
	_, vm, err := c.vm(PermExecute)
	if err != nil {
		return nil, err
	}
	_ = c.boolean("force", false)
	if err := c.validation(); err != nil {
		return nil, err
	}
	if vm.Status == statusDeleted {
		return nil, badRequest("Bad Request: Virtual machine %d is deleted", vm.ID)
	}
	if vm.Status == statusRunning {
		s.vmStopped(vm)
	}
	vm.Status = statusHalted
	return success(), nil
}

func (s *Sim) deleteVM(c *call) (any, error) {
	_, vm, err := c.vm(PermDelete)
	if err != nil {
		return nil, err
	}
	permanently, detachDisks, detachGPU := c.boolean("permanently", false), c.boolean("detach_disks", false), c.boolean("detach_gpu", false)
	if err := c.validation(); err != nil {
		return nil, err
	}
	if gpus := s.vmVGPUs(vm); len(gpus) > 0 {
		if !detachGPU {
			return nil, conflict("Conflict: Virtual machine %d has %d vGPU(s) attached; detach them first or pass detach_gpu=true", vm.ID, len(gpus))
		}
		// Detaching does not release: the reservations stay, unassigned and billed.
		for _, g := range gpus {
			g.VMID = 0
		}
	}
	if detachDisks {
		for _, d := range s.vmDisks(vm) {
			if d.ID == vm.BootDiskID {
				continue
			}
			if err := s.detach(d); err != nil {
				return nil, err
			}
		}
	}
	if permanently {
		s.destroyVM(vm, detachDisks)
		return success(), nil
	}
	if vm.Status == statusRunning {
		s.vmStopped(vm)
	}
	now := float64(c.now().Unix())
	vm.Status, vm.DeletedAt, vm.Updated = statusDeleted, &now, now
	return success(), nil
}

// destroyVM removes a VM for good: its disks go with it unless detached, attached vGPUs are
// detached (and keep billing), port forwards and group memberships disappear.
func (s *Sim) destroyVM(vm *VM, detachDisks bool) {
	if vm.Status != statusDestroyed {
		s.vmDestroyed(vm)
	}
	now := s.opts.Now().Unix()
	for _, d := range s.vmDisks(vm) {
		if detachDisks && d.ID != vm.BootDiskID {
			d.VMID = 0
			continue
		}
		delete(s.st.Disks, d.ID)
	}
	for _, g := range s.vmVGPUs(vm) {
		g.VMID = 0
	}
	for id, pf := range s.st.PortForwards {
		if pf.VMID == vm.ID {
			delete(s.st.PortForwards, id)
		}
	}
	for _, g := range s.st.AntiAffinity {
		g.VMs = slices.DeleteFunc(g.VMs, func(id int) bool { return id == vm.ID })
	}
	vm.Status = statusDestroyed
	d := float64(now)
	vm.DeletedAt = &d
}

func (s *Sim) listVMDisks(c *call) (any, error) {
	_, vm, err := c.vm(PermRead)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, d := range s.vmDisks(vm) {
		out = append(out, s.wireVMDisk(d))
	}
	return list(out), nil
}

// attachDisk needs only rights on the VM: a cloudspace-scoped credential can attach a disk
// it could not have created.
func (s *Sim) attachDisk(c *call) (any, error) {
	cs, vm, err := c.vm(PermUpdate)
	if err != nil {
		return nil, err
	}
	id := c.reqInt("disk_id")
	if err := c.validation(); err != nil {
		return nil, err
	}
	d := s.st.Disks[id]
	if d == nil || d.Customer != cs.Customer || d.DeletedAt != nil {
		return nil, notFound("NotFound: Disk %d not found", id)
	}
	if d.Location != cs.Location {
		return nil, badRequest("Bad Request: Disk %d is in location %s, the VM in %s", id, d.Location, cs.Location)
	}
	if d.VMID == vm.ID {
		return success(), nil
	}
	if d.VMID != 0 {
		return nil, conflict("Conflict: Disk %d is attached to virtual machine %d", id, d.VMID)
	}
	if err := s.attach(d, vm); err != nil {
		return nil, err
	}
	return success(), nil
}

func (s *Sim) detachDisk(c *call) (any, error) {
	_, vm, err := c.vm(PermUpdate)
	if err != nil {
		return nil, err
	}
	id, err := c.pathInt("disk_id")
	if err != nil {
		return nil, err
	}
	d := s.st.Disks[id]
	if d == nil || d.VMID != vm.ID || d.DeletedAt != nil {
		return nil, notFound("NotFound: Disk %d is not attached to virtual machine %d", id, vm.ID)
	}
	if d.ID == vm.BootDiskID {
		return nil, badRequest("Bad Request: the boot disk cannot be detached")
	}
	if err := s.detach(d); err != nil {
		return nil, err
	}
	return success(), nil
}
