package vcosim

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
)

func (s *Sim) cloudspaceRoutes() []*route {
	const base = "/customers/{customer_id}/cloudspaces"
	return []*route{
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: base, Query: []string{"include_deleted", "only_deleted", "include_disabled", "locations", "filter_storage_only"}}, handle: s.listCloudspaces},
		{Route: Route{Method: http.MethodPost, Base: apiBase, Path: base, Body: true}, handle: s.createCloudspace},
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: base + "/{cloudspace_id}"}, handle: s.getCloudspace},
		{Route: Route{Method: http.MethodDelete, Base: apiBase, Path: base + "/{cloudspace_id}", Query: []string{"permanently", "reason"}}, handle: s.deleteCloudspace},
	}
}

type wireCreateCloudspace struct {
	Name            string `json:"name"`
	Location        string `json:"location"`
	PrivateNetwork  string `json:"private_network"`
	LocalDomain     string `json:"local_domain"`
	Host            string `json:"host"`
	VCPUQuota       *int   `json:"vcpu_quota"`
	VDiskSpaceQuota *int   `json:"vdisk_space_quota"`
	MemoryQuota     *int   `json:"memory_quota"`
	PublicIPQuota   *int   `json:"public_ip_quota"`
	Firewall        *struct {
		Private           *bool   `json:"private"`
		ExternalNetworkID *int    `json:"external_network_id"`
		ParentCloudspace  *string `json:"parent_cloudspace_id"`
		Custom            *struct {
			ImageID *int `json:"image_id"`
			CDROMID *int `json:"cdrom_id"`
		} `json:"custom"`
	} `json:"firewall"`
}

func quota(v *int) int {
	if v == nil {
		return -1
	}
	return *v
}

func (s *Sim) createCloudspace(c *call) (any, error) {
	cu, err := c.customer()
	if err != nil {
		return nil, err
	}
	var in wireCreateCloudspace
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	for field, missing := range map[string]bool{"name": in.Name == "", "location": in.Location == "", "firewall": in.Firewall == nil} {
		if missing {
			c.invalid[field] = fmt.Sprintf("'%s' is a required property", field)
		}
	}
	if in.Firewall != nil && in.Firewall.Private == nil {
		c.invalid["firewall.private"] = "'private' is a required property"
	}
	if err := c.validation(); err != nil {
		return nil, err
	}
	if !slices.Contains(cu.Locations, in.Location) {
		return nil, forbidden("Forbidden: Customer has no access to location")
	}
	if err := c.allow(PermCreate, resource{location: in.Location}); err != nil {
		return nil, err
	}
	fw := in.Firewall
	if fw.ParentCloudspace != nil && *fw.ParentCloudspace != "" && fw.ExternalNetworkID != nil {
		return nil, badRequest("Bad Request: parent_cloudspace_id and external_network_id passed together")
	}
	if fw.Custom != nil && fw.Custom.ImageID != nil && fw.Custom.CDROMID != nil {
		return nil, badRequest("Bad Request: image_id and cdrom_id passed together")
	}
	cs := &Cloudspace{
		ID: s.st.stringID("cs"), Customer: cu.ID, Name: in.Name, Location: in.Location, Status: statusDeploying,
		PrivateNetwork: in.PrivateNetwork, LocalDomain: in.LocalDomain, Private: *fw.Private,
		Created: c.now().Unix(), Updated: c.now().Unix(), NextHost: 10,
		Quota: [4]int{quota(in.VCPUQuota), quota(in.MemoryQuota), quota(in.VDiskSpaceQuota), quota(in.PublicIPQuota)},
	}
	if cs.PrivateNetwork == "" {
		cs.PrivateNetwork = "192.168.103.0/24"
	}
	if cs.LocalDomain == "" {
		cs.LocalDomain = "lan"
	}
	if p := fw.ParentCloudspace; p != nil && *p != "" {
		parent := s.st.Cloudspaces[*p]
		if parent == nil || parent.Customer != cu.ID || parent.Status == statusDestroyed {
			return nil, badRequest("Bad Request: Invalid parent cloudspace %s", *p)
		}
		if parent.Location != in.Location {
			return nil, badRequest("Bad Request: parent cloudspace is in another location")
		}
		cs.Parent = parent.ID
	} else if !cs.Private {
		net, err := s.externalNetwork(in.Location, fw.ExternalNetworkID)
		if err != nil {
			return nil, err
		}
		ip, err := allocateIP(net, cs.ID, "")
		if err != nil {
			return nil, err
		}
		cs.PublicIPs = []PublicIP{{ExternalNetworkID: net.ID, IP: ip, Metric: 0}}
	}
	s.st.Cloudspaces[cs.ID] = cs
	c.slow(s.delays.CloudspaceCreate)
	if cs.Status == statusDeploying {
		cs.Status = statusDeployed
	}
	return map[string]string{"cloudspace_id": cs.ID}, nil
}

// externalNetwork picks the requested network, or the location's first public one.
func (s *Sim) externalNetwork(location string, id *int) (*ExternalNetwork, error) {
	for _, n := range s.st.Locations[location].ExternalNetworks {
		if (id == nil && n.Public) || (id != nil && n.ID == *id) {
			return n, nil
		}
	}
	if id != nil {
		return nil, badRequest("Bad Request: External network %d not found in location %s", *id, location)
	}
	return nil, errf(http.StatusServiceUnavailable, "ServiceUnavailableError: location %s has no public external network", location)
}

// allocateIP takes want (or the next free address) from an external network.
func allocateIP(n *ExternalNetwork, owner, want string) (string, error) {
	if want != "" {
		if !strings.HasPrefix(want, n.Prefix+".") {
			return "", badRequest("Bad Request: %s is not an address of external network %d", want, n.ID)
		}
		if n.Used[want] != "" {
			return "", conflict("Conflict: IP address %s is already in use", want)
		}
		n.Used[want] = owner
		return want, nil
	}
	for host := 10; host < 255; host++ {
		ip := fmt.Sprintf("%s.%d", n.Prefix, host)
		if n.Used[ip] == "" {
			n.Used[ip] = owner
			return ip, nil
		}
	}
	return "", badRequest("Bad Request: ResourceLimitExceededError: no free IP address left on external network %d", n.ID)
}

func (s *Sim) releaseIPs(cs *Cloudspace) {
	for _, ip := range cs.PublicIPs {
		for _, n := range s.st.Locations[cs.Location].ExternalNetworks {
			if n.ID == ip.ExternalNetworkID && n.Used[ip.IP] == cs.ID {
				delete(n.Used, ip.IP)
			}
		}
	}
	cs.PublicIPs = nil
}

func (s *Sim) listCloudspaces(c *call) (any, error) {
	cu, err := c.customer()
	if err != nil {
		return nil, err
	}
	includeDeleted, onlyDeleted := c.boolean("include_deleted", false), c.boolean("only_deleted", false)
	_ = c.boolean("include_disabled", true)
	_ = c.boolean("filter_storage_only", false)
	var wanted []string
	if raw := c.str("locations"); raw != "" {
		wanted = strings.Split(raw, ",")
	}
	if err := c.validation(); err != nil {
		return nil, err
	}
	envelope := []map[string]string{}
	up := map[string]bool{}
	for _, l := range cu.Locations {
		if len(wanted) > 0 && !slices.Contains(wanted, l) {
			continue
		}
		status := "OK"
		if s.faults.locationDown(l) {
			status = "ERROR: location " + l + " did not answer"
		} else {
			up[l] = true
		}
		envelope = append(envelope, map[string]string{"location": l, "status": status})
	}
	out := []map[string]any{}
	for _, cs := range sortedValues(s.st.Cloudspaces) {
		deleted := cs.Status == statusDeleted
		if cs.Customer != cu.ID || cs.Status == statusDestroyed || !up[cs.Location] ||
			(deleted && !includeDeleted && !onlyDeleted) || (onlyDeleted && !deleted) ||
			!c.principal.can(PermRead, resource{location: cs.Location, cloudspace: cs.ID}) {
			continue
		}
		nets := []map[string]any{}
		for _, ip := range cs.PublicIPs {
			nets = append(nets, map[string]any{"id": ip.ExternalNetworkID, "ip": ip.IP, "type": "external", "metric": ip.Metric})
		}
		out = append(out, map[string]any{
			"cloudspace_id": cs.ID, "status": cs.Status, "deletion_time": unixString(cs.DeletedAt),
			"external_network_ip": nullable(cs.PrimaryIP()), "external_networks": nets, "name": cs.Name,
			"update_time": cs.Updated, "creation_time": cs.Created, "router_type": "vgw", "cloudspace_mode": cloudspaceMode(cs),
			"private_network": cs.PrivateNetwork, "location": cs.Location,
		})
	}
	return map[string]any{"locations": envelope, "result": out}, nil
}

func cloudspaceMode(cs *Cloudspace) string {
	switch {
	case cs.Parent != "":
		return "nested"
	case cs.Private:
		return "private"
	}
	return "public"
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (s *Sim) getCloudspace(c *call) (any, error) {
	cs, err := c.cloudspace(PermRead)
	if err != nil {
		return nil, err
	}
	var netID *string
	if len(cs.PublicIPs) > 0 {
		id := fmt.Sprint(cs.PublicIPs[0].ExternalNetworkID)
		netID = &id
	} else if cs.Parent != "" {
		netID = &cs.Parent
	}
	return map[string]any{
		"cloudspace_id": cs.ID, "status": cs.Status, "external_network_ip": nullable(cs.PrimaryIP()), "external_network_id": netID,
		"private_network": cs.PrivateNetwork, "name": cs.Name, "local_domain": cs.LocalDomain, "update_time": cs.Updated,
		"creation_time": cs.Created, "router_type": "vgw", "location": cs.Location, "cloudspace_mode": cloudspaceMode(cs),
		"resource_limits": map[string]int{"vcpu_quota": cs.Quota[0], "memory_quota": cs.Quota[1], "vdisk_space_quota": cs.Quota[2],
			"public_ip_quota": cs.Quota[3], "external_network_quota": -1},
	}, nil
}

func (s *Sim) deleteCloudspace(c *call) (any, error) {
	cs, err := c.cloudspace(PermDelete)
	if err != nil {
		return nil, err
	}
	permanently := c.boolean("permanently", false)
	_ = c.str("reason")
	if err := c.validation(); err != nil {
		return nil, err
	}
	live := 0
	for _, vm := range s.st.vmsIn(cs.ID) {
		if vm.Status != statusDeleted && vm.Status != statusDestroyed {
			live++
		}
	}
	if live > 0 {
		return nil, conflict("Conflict: Cloudspace %s still contains %d virtual machine(s), delete them first", cs.ID, live)
	}
	now := c.now().Unix()
	cs.Updated = now
	if !permanently {
		cs.Status, cs.DeletedAt = statusDeleted, &now
		return success(), nil
	}
	s.destroyCloudspace(cs)
	return success(), nil
}

// destroyCloudspace removes a cloudspace for good with everything under it. Links go too:
// the cloudspace delete cascade is authoritative, whatever link deletes said before.
func (s *Sim) destroyCloudspace(cs *Cloudspace) {
	cs.Status = statusDestroyed
	for _, vm := range s.st.vmsIn(cs.ID) {
		s.destroyVM(vm, false)
	}
	s.releaseIPs(cs)
	maps.DeleteFunc(s.st.PortForwards, func(_ string, pf *PortForward) bool { return pf.CloudspaceID == cs.ID })
	maps.DeleteFunc(s.st.ServerPools, func(_ string, p *ServerPool) bool { return p.CloudspaceID == cs.ID })
	maps.DeleteFunc(s.st.LoadBalancers, func(_ string, lb *LoadBalancer) bool { return lb.CloudspaceID == cs.ID })
	maps.DeleteFunc(s.st.AntiAffinity, func(_ string, g *AntiAffinityGroup) bool { return g.CloudspaceID == cs.ID })
	s.st.DNSRecords = slices.DeleteFunc(s.st.DNSRecords, func(r *DNSRecord) bool { return r.CloudspaceID == cs.ID })
	s.st.Links = slices.DeleteFunc(s.st.Links, func(l *Link) bool { return l.A == cs.ID || l.B == cs.ID })
}
