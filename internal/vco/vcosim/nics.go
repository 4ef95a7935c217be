package vcosim

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
)

// ExternalNIC is a NIC of a VM on an external network, attached after the VM was created.
type ExternalNIC struct {
	DeviceName string `json:"device_name"`
	MAC        string `json:"mac"`
	IP         string `json:"ip"`
	NetworkID  int    `json:"network_id"`
	Model      string `json:"model"`
}

// NICDevices is told when a NIC is attached to or detached from a VM, so that a test harness
// can make it appear in a node's network namespace: on the platform the NIC appears in the
// VM, and the simulator has no VM to show it in. It is called with the simulator's lock held
// before the call answers, so the interface is there (or gone) when the API says so. An error
// fails the call with a 500 and leaves the NIC as it was.
type NICDevices interface {
	Attached(vmID int, mac string) error
	Detached(vmID int, mac string) error
}

// SetNICDevices installs the harness that shows attached NICs (nil removes it).
func (s *Sim) SetNICDevices(d NICDevices) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nicDevices = d
}

var nicModels = []string{"ne2k_pci", "i82551", "i82557b", "i82559er", "rtl8139", "e1000", "pcnet", "virtio"}

func (s *Sim) nicRoutes() []*route {
	const nics = "/customers/{customer_id}/cloudspaces/{cloudspace_id}/vms/{vm_id}/external-nics"
	return []*route{
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: nics}, handle: s.listExternalNICs},
		{Route: Route{Method: http.MethodPost, Base: apiBase, Path: nics,
			Query: []string{"external_network_id", "external_network_ip", "model", "external_network_type", "external_cloudspace_id"}}, handle: s.attachExternalNIC},
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: nics + "/{external_ip_address}"}, handle: s.getExternalNIC},
		{Route: Route{Method: http.MethodDelete, Base: apiBase, Path: nics + "/{external_ip_address}",
			Query: []string{"external_network_id", "external_network_type", "external_cloudspace_id"}}, handle: s.detachExternalNIC},
	}
}

func wireNIC(n *ExternalNIC) map[string]any {
	return map[string]any{"device_name": n.DeviceName, "mac_address": n.MAC, "ip_address": n.IP, "network_id": n.NetworkID,
		"nic_type": "EXTERNAL", "model": n.Model, "external_cloudspace_id": ""}
}

func (s *Sim) listExternalNICs(c *call) (any, error) {
	_, vm, err := c.vm(PermRead)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, n := range vm.ExternalNICs {
		out = append(out, wireNIC(n))
	}
	return list(out), nil
}

func (s *Sim) getExternalNIC(c *call) (any, error) {
	_, vm, err := c.vm(PermRead)
	if err != nil {
		return nil, err
	}
	ip := c.path("external_ip_address")
	for _, n := range vm.ExternalNICs {
		if n.IP == ip {
			return wireNIC(n), nil
		}
	}
	return nil, notFound("NotFound: virtual machine %d has no external NIC with address %s", vm.ID, ip)
}

// attachExternalNIC gives the VM a NIC on an external network with an address of that network
// (the one asked for, or the next free one) and a new MAC. The answer is only {success}: the
// caller finds the NIC in the list.
func (s *Sim) attachExternalNIC(c *call) (any, error) {
	cs, vm, err := c.vm(PermUpdate)
	if err != nil {
		return nil, err
	}
	id, want, model, typ := c.reqInt("external_network_id"), c.str("external_network_ip"), c.str("model"), c.str("external_network_type")
	_ = c.str("external_cloudspace_id")
	if err := c.validation(); err != nil {
		return nil, err
	}
	if typ != "" && typ != "external" {
		return nil, badRequest("Bad Request: the simulator attaches NICs on external networks only (external_network_type=external)")
	}
	if model == "" {
		model = "virtio"
	}
	if !slices.Contains(nicModels, model) {
		return nil, badRequest("Bad Request: model must be one of %v", nicModels)
	}
	if vm.Status == statusDeleted {
		return nil, badRequest("Bad Request: Virtual machine %d is deleted", vm.ID)
	}
	n, err := s.externalNetwork(cs.Location, &id)
	if err != nil {
		return nil, err
	}
	ip, err := allocateIP(n, "vm:"+strconv.Itoa(vm.ID), want)
	if err != nil {
		return nil, err
	}
	nic := &ExternalNIC{DeviceName: fmt.Sprintf("eth%d", len(vm.ExternalNICs)+1), IP: ip, NetworkID: id, Model: model,
		MAC: fmt.Sprintf("52:54:01:%02x:%02x:%02x", s.st.NextInt>>16&0xff, s.st.NextInt>>8&0xff, s.st.NextInt&0xff)}
	s.st.intID()
	if s.nicDevices != nil {
		if err := s.nicDevices.Attached(vm.ID, nic.MAC); err != nil {
			delete(n.Used, ip)
			return nil, errf(http.StatusInternalServerError, "Exception: attaching the NIC: %v", err)
		}
	}
	vm.ExternalNICs = append(vm.ExternalNICs, nic)
	return success(), nil
}

func (s *Sim) detachExternalNIC(c *call) (any, error) {
	cs, vm, err := c.vm(PermUpdate)
	if err != nil {
		return nil, err
	}
	id, typ := c.reqInt("external_network_id"), c.reqStr("external_network_type")
	_ = c.str("external_cloudspace_id")
	if err := c.validation(); err != nil {
		return nil, err
	}
	ip := c.path("external_ip_address")
	i := slices.IndexFunc(vm.ExternalNICs, func(n *ExternalNIC) bool { return n.IP == ip && n.NetworkID == id })
	if i < 0 || typ != "external" {
		return nil, notFound("NotFound: virtual machine %d has no external NIC with address %s on network %d", vm.ID, ip, id)
	}
	nic := vm.ExternalNICs[i]
	if s.nicDevices != nil {
		if err := s.nicDevices.Detached(vm.ID, nic.MAC); err != nil {
			return nil, errf(http.StatusInternalServerError, "Exception: detaching the NIC: %v", err)
		}
	}
	if n, err := s.externalNetwork(cs.Location, &id); err == nil {
		delete(n.Used, ip)
	}
	vm.ExternalNICs = slices.Delete(vm.ExternalNICs, i, i+1)
	return success(), nil
}
