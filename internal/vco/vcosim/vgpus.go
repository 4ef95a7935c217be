package vcosim

import (
	"net/http"
	"slices"
)

func (s *Sim) vgpuRoutes() []*route {
	const loc = "/customers/{customer_id}/locations/{location}"
	const vm = "/customers/{customer_id}/cloudspaces/{cloudspace_id}/vms/{vm_id}"
	get, post, del := http.MethodGet, http.MethodPost, http.MethodDelete
	return []*route{
		{Route: Route{Method: get, Base: apiBase, Path: loc + "/gpus"}, handle: s.listGPUProfiles},
		{Route: Route{Method: post, Base: apiBase, Path: loc + "/gpus/{gpu_id}", Body: true}, handle: s.reserveVGPU},
		{Route: Route{Method: get, Base: apiBase, Path: loc + "/vgpus", Query: []string{"limit", "start_after", "only_deleted", "include_deleted"}}, handle: s.listVGPUs},
		{Route: Route{Method: post, Base: apiBase, Path: loc + "/vgpus/{vgpu_id}"}, handle: s.restoreVGPU},
		{Route: Route{Method: del, Base: apiBase, Path: loc + "/vgpus/{vgpu_id}", Query: []string{"detach", "permanently"}}, handle: s.releaseVGPU},
		{Route: Route{Method: post, Base: apiBase, Path: vm + "/gpus/{gpu_id}", Body: true}, handle: s.reserveAndAttachVGPU},
		{Route: Route{Method: post, Base: apiBase, Path: vm + "/vgpus/{vgpu_id}"}, handle: s.attachVGPU},
		{Route: Route{Method: del, Base: apiBase, Path: vm + "/vgpus/{vgpu_id}"}, handle: s.detachVGPU},
	}
}

func (s *Sim) gpuProfile(location, id string) (*GPUProfile, error) {
	for _, p := range s.st.Locations[location].GPUProfiles {
		if p.ID == id {
			if s.available(location, p) <= 0 {
				return nil, badRequest("Bad Request: ResourceLimitExceededError: no instances of GPU profile %s left in %s", id, location)
			}
			return p, nil
		}
	}
	return nil, notFound("NotFound: GPU profile %s not found in location %s", id, location)
}

// available counts what is left of a profile: every reservation not released permanently
// holds an instance, soft-deleted ones included.
func (s *Sim) available(location string, p *GPUProfile) int {
	n := p.Instances
	for _, v := range s.st.VGPUs {
		if v.Location == location && v.GPUID == p.ID {
			n--
		}
	}
	return n
}

func (s *Sim) gpuDescription(v *VGPU) string {
	for _, p := range s.st.Locations[v.Location].GPUProfiles {
		if p.ID == v.GPUID {
			return p.Description
		}
	}
	return ""
}

func (s *Sim) reserve(customer, location string, p *GPUProfile, name string, vmID int, now int64) *VGPU {
	v := &VGPU{ID: s.st.stringID("vgpu"), Customer: customer, Location: location, Name: name, GPUID: p.ID, VMID: vmID, ReservedAt: now}
	s.st.VGPUs[v.ID] = v
	s.st.VGPUOrder = append(s.st.VGPUOrder, v.ID)
	return v
}

func (s *Sim) listGPUProfiles(c *call) (any, error) {
	_, loc, err := c.location(PermRead)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, p := range loc.GPUProfiles {
		out = append(out, map[string]any{"model": p.Model, "vendor": p.Vendor, "available_instances": s.available(loc.Name, p), "description": p.Description, "id": p.ID})
	}
	return list(out), nil
}

func (c *call) vgpuName() (string, error) {
	var in struct {
		Name *string `json:"vgpu_name"`
	}
	if err := c.decode(&in); err != nil {
		return "", err
	}
	if in.Name == nil {
		return "", &apiError{status: http.StatusBadRequest, message: "Input payload validation failed", fields: map[string]string{"vgpu_name": "'vgpu_name' is a required property"}}
	}
	return *in.Name, nil
}

// reserveVGPU reserves without attaching; billing starts now. Names need not be unique.
func (s *Sim) reserveVGPU(c *call) (any, error) {
	cu, loc, err := c.location(PermCreate)
	if err != nil {
		return nil, err
	}
	name, err := c.vgpuName()
	if err != nil {
		return nil, err
	}
	p, err := s.gpuProfile(loc.Name, c.path("gpu_id"))
	if err != nil {
		return nil, err
	}
	v := s.reserve(cu.ID, loc.Name, p, name, 0, c.now().Unix())
	return map[string]string{"vgpu_id": v.ID}, nil
}

func (s *Sim) reserveAndAttachVGPU(c *call) (any, error) {
	cs, vm, err := c.vm(PermCreate)
	if err != nil {
		return nil, err
	}
	name, err := c.vgpuName()
	if err != nil {
		return nil, err
	}
	if err := s.checkAttachable(vm); err != nil {
		return nil, err
	}
	p, err := s.gpuProfile(cs.Location, c.path("gpu_id"))
	if err != nil {
		return nil, err
	}
	v := s.reserve(cs.Customer, cs.Location, p, name, vm.ID, c.now().Unix())
	return map[string]string{"vgpu_id": v.ID}, nil
}

func (s *Sim) checkAttachable(vm *VM) error {
	if vm.Status == statusDeleted {
		return badRequest("Bad Request: Virtual machine %d is deleted", vm.ID)
	}
	if s.opts.GPUAttachRequiresHalted && vm.Status == statusRunning {
		return conflict("Conflict: Virtual machine %d must be halted to attach or detach a vGPU", vm.ID)
	}
	return nil
}

func vgpuStatus(v *VGPU) string {
	switch {
	case v.DeletedAt != nil:
		return statusDeleted
	case v.VMID != 0:
		return "ATTACHED"
	}
	return "RESERVED"
}

// listVGPUs is one of the few paginated lists: limit (default 25, 0 = all) and start_after,
// an offset into the reservation order.
func (s *Sim) listVGPUs(c *call) (any, error) {
	cu, loc, err := c.location(PermRead)
	if err != nil {
		return nil, err
	}
	limit, start := c.int("limit", 25), c.int("start_after", 0)
	onlyDeleted, includeDeleted := c.boolean("only_deleted", false), c.boolean("include_deleted", false)
	if err := c.validation(); err != nil {
		return nil, err
	}
	if limit < 0 || start < 0 {
		return nil, badRequest("Bad Request: limit and start_after must not be negative")
	}
	if err := s.runVGPUListHook(cu.ID, loc.Name, start, includeDeleted, onlyDeleted); err != nil {
		return nil, err
	}
	var all []*VGPU
	for _, v := range s.st.vgpusIn(cu.ID, loc.Name) {
		if listedVGPU(v, includeDeleted, onlyDeleted) {
			all = append(all, v)
		}
	}
	count, pages := len(all), 1
	page := all[min(start, count):]
	if limit > 0 {
		pages = (count + limit - 1) / limit
		page = page[:min(limit, len(page))]
	}
	data := make([]wireVGPU, 0, len(page))
	for _, v := range page {
		w := wireVGPU{AccountID: 1, CustomerName: cu.Name, CustomerID: cu.ID, ID: v.ID, Name: v.Name, GPUID: v.GPUID,
			Description: s.gpuDescription(v), Status: vgpuStatus(v), DeletionTime: v.DeletedAt, Location: v.Location}
		if vm := s.st.VMs[v.VMID]; vm != nil {
			cs := s.st.Cloudspaces[vm.CloudspaceID]
			w.VM = &wireVGPUVM{ID: vm.ID, Name: vm.Name, CloudspaceID: cs.ID, CloudspaceName: cs.Name}
		}
		data = append(data, w)
	}
	return map[string]any{"pagination": map[string]int{"limit": limit, "pages": pages, "count": count}, "data": data}, nil
}

// listedVGPU applies the list call's filters: the recycle bin is listed with include_deleted,
// alone with only_deleted.
func listedVGPU(v *VGPU, includeDeleted, onlyDeleted bool) bool {
	deleted := v.DeletedAt != nil
	return !(deleted && !includeDeleted && !onlyDeleted) && !(onlyDeleted && !deleted)
}

// wireVGPU is a struct, not a map: a 10,000-entry page encodes several times faster.
type wireVGPU struct {
	AccountID    int         `json:"account_id"`
	CustomerName string      `json:"customer_name"`
	CustomerID   string      `json:"customer_id"`
	ID           string      `json:"vgpu_id"`
	Name         string      `json:"vgpu_name"`
	GPUID        string      `json:"gpu_id"`
	Description  string      `json:"description"`
	Status       string      `json:"status"`
	VM           *wireVGPUVM `json:"virtual_machine"` // null when unattached
	DeletionTime *int64      `json:"deletion_time"`
	Location     string      `json:"location"`
}

type wireVGPUVM struct {
	ID             int    `json:"id"`
	Name           string `json:"name"`
	CloudspaceID   string `json:"cloudspace_id"`
	CloudspaceName string `json:"cloudspace_name"`
}

// locationVGPU resolves {location}/{vgpu_id} and checks perm on the location.
func (s *Sim) locationVGPU(c *call, perm string) (*VGPU, error) {
	cu, loc, err := c.location(perm)
	if err != nil {
		return nil, err
	}
	return s.vgpuIn(c, cu.ID, loc.Name)
}

func (s *Sim) vgpuIn(c *call, customer, location string) (*VGPU, error) {
	v := s.st.VGPUs[c.path("vgpu_id")]
	if v == nil || v.Customer != customer || v.Location != location {
		return nil, notFound("NotFound: vGPU %s not found in location %s", c.path("vgpu_id"), location)
	}
	return v, nil
}

func (s *Sim) restoreVGPU(c *call) (any, error) {
	v, err := s.locationVGPU(c, PermUpdate)
	if err != nil {
		return nil, err
	}
	v.DeletedAt = nil
	return nil, nil
}

// releaseVGPU soft-deletes by default: the reservation then sits in the recycle bin and is
// still billed. Only permanently=true stops the charge.
func (s *Sim) releaseVGPU(c *call) (any, error) {
	v, err := s.locationVGPU(c, PermDelete)
	if err != nil {
		return nil, err
	}
	detach, permanently := c.boolean("detach", true), c.boolean("permanently", false)
	if err := c.validation(); err != nil {
		return nil, err
	}
	if v.VMID != 0 {
		if !detach {
			return nil, conflict("Conflict: vGPU %s is attached to virtual machine %d; pass detach=true", v.ID, v.VMID)
		}
		v.VMID = 0
	}
	if permanently {
		delete(s.st.VGPUs, v.ID)
		s.st.VGPUOrder = slices.DeleteFunc(s.st.VGPUOrder, func(id string) bool { return id == v.ID })
		return nil, nil
	}
	now := c.now().Unix()
	v.DeletedAt = &now
	return nil, nil
}

func (s *Sim) attachVGPU(c *call) (any, error) {
	cs, vm, err := c.vm(PermUpdate)
	if err != nil {
		return nil, err
	}
	v, err := s.vgpuIn(c, cs.Customer, cs.Location)
	if err != nil {
		return nil, err
	}
	if v.DeletedAt != nil {
		return nil, badRequest("Bad Request: vGPU %s is deleted; restore it first", v.ID)
	}
	if v.VMID == vm.ID {
		return nil, nil
	}
	if v.VMID != 0 {
		return nil, conflict("Conflict: vGPU %s is attached to virtual machine %d", v.ID, v.VMID)
	}
	if err := s.checkAttachable(vm); err != nil {
		return nil, err
	}
	v.VMID = vm.ID
	return nil, nil
}

// detachVGPU unassigns; the reservation stays and keeps billing.
func (s *Sim) detachVGPU(c *call) (any, error) {
	cs, vm, err := c.vm(PermUpdate)
	if err != nil {
		return nil, err
	}
	v, err := s.vgpuIn(c, cs.Customer, cs.Location)
	if err != nil {
		return nil, err
	}
	if v.VMID != vm.ID {
		return nil, notFound("NotFound: vGPU %s is not attached to virtual machine %d", v.ID, vm.ID)
	}
	if err := s.checkAttachable(vm); err != nil {
		return nil, err
	}
	v.VMID = 0
	return nil, nil
}
