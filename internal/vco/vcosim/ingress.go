package vcosim

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
)

func (s *Sim) ingressRoutes() []*route {
	const cs = "/customers/{customer_id}/cloudspaces/{cloudspace_id}"
	const pf, sp, lb = cs + "/portforwards", cs + "/ingress/server-pools", cs + "/ingress/load-balancers"
	get, post, put, del := http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete
	pfQuery := []string{"local_port", "public_port", "vm_id", "public_ip", "protocol", "till_public_port", "nested_cs_id"}
	return []*route{
		{Route: Route{Method: get, Base: apiBase, Path: pf}, handle: s.listPortForwards},
		{Route: Route{Method: post, Base: apiBase, Path: pf, Query: pfQuery}, handle: s.createPortForward},
		{Route: Route{Method: get, Base: apiBase, Path: pf + "/{portforward_id}"}, handle: s.getPortForward},
		{Route: Route{Method: del, Base: apiBase, Path: pf + "/{portforward_id}"}, handle: s.deletePortForward},
		{Route: Route{Method: get, Base: apiBase, Path: sp}, handle: s.listServerPools},
		{Route: Route{Method: post, Base: apiBase, Path: sp, Query: []string{"name", "description"}}, handle: s.createServerPool},
		{Route: Route{Method: get, Base: apiBase, Path: sp + "/{serverpool_id}"}, handle: s.getServerPool},
		{Route: Route{Method: del, Base: apiBase, Path: sp + "/{serverpool_id}"}, handle: s.deleteServerPool},
		{Route: Route{Method: get, Base: apiBase, Path: sp + "/{serverpool_id}/hosts"}, handle: s.listPoolHosts},
		{Route: Route{Method: post, Base: apiBase, Path: sp + "/{serverpool_id}/hosts", Query: []string{"address"}}, handle: s.addPoolHost},
		{Route: Route{Method: del, Base: apiBase, Path: sp + "/{serverpool_id}/hosts/{host_id}"}, handle: s.removePoolHost},
		{Route: Route{Method: get, Base: apiBase, Path: lb}, handle: s.listLoadBalancers},
		{Route: Route{Method: post, Base: apiBase, Path: lb, Body: true}, handle: s.createLoadBalancer},
		{Route: Route{Method: get, Base: apiBase, Path: lb + "/{loadbalancer_id}"}, handle: s.getLoadBalancer},
		{Route: Route{Method: put, Base: apiBase, Path: lb + "/{loadbalancer_id}", Body: true}, handle: s.updateLoadBalancer},
		{Route: Route{Method: del, Base: apiBase, Path: lb + "/{loadbalancer_id}"}, handle: s.deleteLoadBalancer},
	}
}

// portInUse reports who already listens on ip:port/proto of a cloudspace. An empty LB
// front-end IP listens on every IP of the cloudspace.
func (s *Sim) portInUse(cs *Cloudspace, ip string, from, to int, proto, exceptPF, exceptLB string) string {
	proto = strings.ToLower(proto)
	overlap := func(a, b int) bool { return a <= to && from <= b }
	for _, pf := range s.st.PortForwards {
		last := max(pf.TillPublicPort, pf.PublicPort)
		if pf.CloudspaceID == cs.ID && pf.ID != exceptPF && strings.EqualFold(pf.Protocol, proto) && (ip == "" || pf.PublicIP == ip) && overlap(pf.PublicPort, last) {
			return "port forward " + pf.ID
		}
	}
	for _, lb := range s.st.LoadBalancers {
		if lb.CloudspaceID == cs.ID && lb.ID != exceptLB && strings.EqualFold(lb.Type, proto) && (ip == "" || lb.FrontIP == "" || lb.FrontIP == ip) && overlap(lb.FrontPort, lb.FrontPort) {
			return "load balancer " + lb.ID
		}
	}
	return ""
}

func (s *Sim) hasPublicIP(cs *Cloudspace, ip string) bool {
	return slices.ContainsFunc(cs.PublicIPs, func(p PublicIP) bool { return p.IP == ip })
}

func (s *Sim) wirePortForward(pf *PortForward) map[string]any {
	return map[string]any{"portforward_id": pf.ID, "protocol": pf.Protocol, "local_port": pf.LocalPort, "public_port": pf.PublicPort,
		"public_ip": pf.PublicIP, "local_ip": pf.LocalIP, "vm_id": nullableInt(pf.VMID), "nested_cloudspace_name": nil,
		"nested_cloudspace_id": nil, "till_public_port": nullableInt(pf.TillPublicPort)}
}

func (s *Sim) portForwardsOf(cs *Cloudspace) []*PortForward {
	var out []*PortForward
	for _, pf := range sortedValues(s.st.PortForwards) {
		if pf.CloudspaceID == cs.ID {
			out = append(out, pf)
		}
	}
	return out
}

func (s *Sim) listPortForwards(c *call) (any, error) {
	cs, err := c.cloudspace(PermRead)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, pf := range s.portForwardsOf(cs) {
		out = append(out, s.wirePortForward(pf))
	}
	return list(out), nil
}

func (s *Sim) createPortForward(c *call) (any, error) {
	cs, err := c.cloudspace(PermCreate)
	if err != nil {
		return nil, err
	}
	pf := &PortForward{CloudspaceID: cs.ID, LocalPort: c.reqInt("local_port"), PublicPort: c.reqInt("public_port"),
		Protocol: strings.ToLower(c.reqStr("protocol")), VMID: c.int("vm_id", 0), PublicIP: c.str("public_ip"), TillPublicPort: c.int("till_public_port", 0)}
	if c.str("nested_cs_id") != "" {
		return nil, badRequest("Bad Request: the simulator does not model nested cloudspace port forwards")
	}
	if err := c.validation(); err != nil {
		return nil, err
	}
	if pf.Protocol != "tcp" && pf.Protocol != "udp" {
		return nil, badRequest("Bad Request: protocol must be tcp or udp")
	}
	if pf.PublicIP == "" {
		pf.PublicIP = cs.PrimaryIP()
	}
	if !s.hasPublicIP(cs, pf.PublicIP) {
		return nil, badRequest("Bad Request: %s is not an external IP of cloudspace %s", pf.PublicIP, cs.ID)
	}
	vm := s.st.VMs[pf.VMID]
	if vm == nil || vm.CloudspaceID != cs.ID || vm.Status == statusDestroyed {
		return nil, notFound("NotFound: Virtual machine %d not found in cloudspace %s", pf.VMID, cs.ID)
	}
	pf.LocalIP = vm.PrivateIP
	if who := s.portInUse(cs, pf.PublicIP, pf.PublicPort, max(pf.PublicPort, pf.TillPublicPort), pf.Protocol, "", ""); who != "" {
		return nil, conflict("Conflict: %s:%d/%s is already used by %s", pf.PublicIP, pf.PublicPort, pf.Protocol, who)
	}
	pf.ID = s.st.stringID("pf")
	s.st.PortForwards[pf.ID] = pf
	return map[string]string{"portforward_id": pf.ID}, nil
}

func (s *Sim) portForwardFor(c *call, perm string) (*Cloudspace, *PortForward, error) {
	cs, err := c.cloudspace(perm)
	if err != nil {
		return nil, nil, err
	}
	pf := s.st.PortForwards[c.path("portforward_id")]
	if pf == nil || pf.CloudspaceID != cs.ID {
		return nil, nil, notFound("NotFound: Port forward %s not found", c.path("portforward_id"))
	}
	return cs, pf, nil
}

func (s *Sim) getPortForward(c *call) (any, error) {
	_, pf, err := s.portForwardFor(c, PermRead)
	if err != nil {
		return nil, err
	}
	return s.wirePortForward(pf), nil
}

// deletePortForward answers with the remaining forwards in the older model the swagger
// declares for this operation.
func (s *Sim) deletePortForward(c *call) (any, error) {
	cs, pf, err := s.portForwardFor(c, PermDelete)
	if err != nil {
		return nil, err
	}
	delete(s.st.PortForwards, pf.ID)
	out := []map[string]any{}
	for _, p := range s.portForwardsOf(cs) {
		name := ""
		if vm := s.st.VMs[p.VMID]; vm != nil {
			name = vm.Name
		}
		out = append(out, map[string]any{"portforward_id": p.ID, "protocol": p.Protocol, "local_port": p.LocalPort,
			"public_port": p.PublicPort, "range_length": max(p.TillPublicPort-p.PublicPort, 0) + 1, "public_ip": p.PublicIP,
			"machine_name": name, "vm_id": p.VMID, "local_ip": p.LocalIP, "nested_cloudspace_name": nil, "nested_cloudspace_id": nil})
	}
	return list(out), nil
}

func (s *Sim) listServerPools(c *call) (any, error) {
	cs, err := c.cloudspace(PermRead)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, p := range sortedValues(s.st.ServerPools) {
		if p.CloudspaceID == cs.ID {
			out = append(out, map[string]any{"serverpool_id": p.ID, "name": p.Name, "locked": p.Locked})
		}
	}
	return list(out), nil
}

func (s *Sim) createServerPool(c *call) (any, error) {
	cs, err := c.cloudspace(PermCreate)
	if err != nil {
		return nil, err
	}
	p := &ServerPool{CloudspaceID: cs.ID, Name: c.reqStr("name"), Description: c.str("description"), Hosts: []PoolHost{}}
	if err := c.validation(); err != nil {
		return nil, err
	}
	p.ID = s.st.stringID("sp")
	s.st.ServerPools[p.ID] = p
	return map[string]string{"id": p.ID}, nil
}

func (s *Sim) poolFor(c *call, perm string) (*Cloudspace, *ServerPool, error) {
	cs, err := c.cloudspace(perm)
	if err != nil {
		return nil, nil, err
	}
	p := s.st.ServerPools[c.path("serverpool_id")]
	if p == nil || p.CloudspaceID != cs.ID {
		return nil, nil, notFound("NotFound: Server pool %s not found", c.path("serverpool_id"))
	}
	return cs, p, nil
}

func (s *Sim) getServerPool(c *call) (any, error) {
	_, p, err := s.poolFor(c, PermRead)
	if err != nil {
		return nil, err
	}
	return map[string]any{"serverpool_id": p.ID, "name": p.Name, "description": p.Description, "locked": p.Locked, "hosts": wireHosts(p)}, nil
}

func wireHosts(p *ServerPool) []map[string]string {
	out := []map[string]string{}
	for _, h := range p.Hosts {
		out = append(out, map[string]string{"host_id": h.ID, "address": h.Address})
	}
	return out
}

func (s *Sim) deleteServerPool(c *call) (any, error) {
	_, p, err := s.poolFor(c, PermDelete)
	if err != nil {
		return nil, err
	}
	for _, lb := range s.st.LoadBalancers {
		if lb.PoolID == p.ID {
			return nil, conflict("Conflict: Server pool %s is used by load balancer %s", p.ID, lb.ID)
		}
	}
	delete(s.st.ServerPools, p.ID)
	return success(), nil
}

func (s *Sim) listPoolHosts(c *call) (any, error) {
	_, p, err := s.poolFor(c, PermRead)
	if err != nil {
		return nil, err
	}
	return list(wireHosts(p)), nil
}

// addPoolHost takes an address only: the platform has no port or weight per member.
func (s *Sim) addPoolHost(c *call) (any, error) {
	_, p, err := s.poolFor(c, PermUpdate)
	if err != nil {
		return nil, err
	}
	addr := c.reqStr("address")
	if err := c.validation(); err != nil {
		return nil, err
	}
	if net.ParseIP(addr) == nil && (addr == "" || strings.ContainsAny(addr, ":/ ")) {
		return nil, badRequest("Bad Request: address must be an IPv4 or IPv6 address or a DNS name, without a port")
	}
	if slices.ContainsFunc(p.Hosts, func(h PoolHost) bool { return h.Address == addr }) {
		return nil, conflict("Conflict: %s is already a member of server pool %s", addr, p.ID)
	}
	h := PoolHost{ID: s.st.stringID("host"), Address: addr}
	p.Hosts = append(p.Hosts, h)
	return map[string]string{"host_id": h.ID, "address": h.Address}, nil
}

func (s *Sim) removePoolHost(c *call) (any, error) {
	_, p, err := s.poolFor(c, PermUpdate)
	if err != nil {
		return nil, err
	}
	id := c.path("host_id")
	i := slices.IndexFunc(p.Hosts, func(h PoolHost) bool { return h.ID == id })
	if i < 0 {
		return nil, notFound("NotFound: Host %s not found in server pool %s", id, p.ID)
	}
	p.Hosts = slices.Delete(p.Hosts, i, i+1)
	return success(), nil
}

type wireLoadBalancer struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Type        string `json:"type"`
	Locked      bool   `json:"locked"`
	FrontEnd    *struct {
		Port      int    `json:"port"`
		IPAddress string `json:"ip_address"`
		TLS       *LBTLS `json:"tls"`
	} `json:"front_end"`
	BackEnd *struct {
		ServerPoolID string `json:"serverpool_id"`
		TargetPort   int    `json:"target_port"`
	} `json:"back_end"`
}

func (s *Sim) listLoadBalancers(c *call) (any, error) {
	cs, err := c.cloudspace(PermRead)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, lb := range sortedValues(s.st.LoadBalancers) {
		if lb.CloudspaceID != cs.ID {
			continue
		}
		pool := ""
		if p := s.st.ServerPools[lb.PoolID]; p != nil {
			pool = p.Name
		}
		out = append(out, map[string]any{"loadbalancer_id": lb.ID, "name": lb.Name, "serverpool_name": pool, "locked": lb.Locked, "type": lb.Type})
	}
	return list(out), nil
}

// loadBalancerFromBody validates a create/update body against the cloudspace.
func (s *Sim) loadBalancerFromBody(c *call, cs *Cloudspace, exceptID string) (*LoadBalancer, error) {
	var in wireLoadBalancer
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	for field, missing := range map[string]bool{"name": in.Name == "", "type": in.Type == "", "front_end": in.FrontEnd == nil, "back_end": in.BackEnd == nil} {
		if missing {
			c.invalid[field] = fmt.Sprintf("'%s' is a required property", field)
		}
	}
	if err := c.validation(); err != nil {
		return nil, err
	}
	typ := strings.ToUpper(in.Type)
	if typ != "TCP" && typ != "UDP" {
		return nil, badRequest("Bad Request: type must be TCP or UDP (L7 is a reverse proxy)")
	}
	lb := &LoadBalancer{CloudspaceID: cs.ID, Name: in.Name, Description: in.Description, Type: in.Type, Locked: in.Locked,
		FrontIP: in.FrontEnd.IPAddress, FrontPort: in.FrontEnd.Port, TLS: in.FrontEnd.TLS, PoolID: in.BackEnd.ServerPoolID, TargetPort: in.BackEnd.TargetPort}
	if lb.FrontPort <= 0 || lb.FrontPort > 65535 || lb.TargetPort <= 0 || lb.TargetPort > 65535 {
		return nil, badRequest("Bad Request: front_end.port and back_end.target_port must be between 1 and 65535")
	}
	if lb.FrontIP != "" && !s.hasPublicIP(cs, lb.FrontIP) {
		return nil, badRequest("Bad Request: front_end.ip_address %s is not an external IP of cloudspace %s", lb.FrontIP, cs.ID)
	}
	if p := s.st.ServerPools[lb.PoolID]; p == nil || p.CloudspaceID != cs.ID {
		return nil, notFound("NotFound: Server pool %s not found", lb.PoolID)
	}
	if who := s.portInUse(cs, lb.FrontIP, lb.FrontPort, lb.FrontPort, typ, "", exceptID); who != "" {
		return nil, conflict("Conflict: front end port %d/%s is already used by %s", lb.FrontPort, typ, who)
	}
	return lb, nil
}

func (s *Sim) createLoadBalancer(c *call) (any, error) {
	cs, err := c.cloudspace(PermCreate)
	if err != nil {
		return nil, err
	}
	lb, err := s.loadBalancerFromBody(c, cs, "")
	if err != nil {
		return nil, err
	}
	lb.ID = s.st.stringID("lb")
	s.st.LoadBalancers[lb.ID] = lb
	return map[string]string{"id": lb.ID}, nil
}

func (s *Sim) loadBalancerFor(c *call, perm string) (*Cloudspace, *LoadBalancer, error) {
	cs, err := c.cloudspace(perm)
	if err != nil {
		return nil, nil, err
	}
	lb := s.st.LoadBalancers[c.path("loadbalancer_id")]
	if lb == nil || lb.CloudspaceID != cs.ID {
		return nil, nil, notFound("NotFound: Load balancer %s not found", c.path("loadbalancer_id"))
	}
	return cs, lb, nil
}

func (s *Sim) getLoadBalancer(c *call) (any, error) {
	_, lb, err := s.loadBalancerFor(c, PermRead)
	if err != nil {
		return nil, err
	}
	tls := lb.TLS
	if tls == nil {
		tls = &LBTLS{}
	}
	return map[string]any{"loadbalancer_id": lb.ID, "name": lb.Name, "description": lb.Description, "locked": lb.Locked, "type": lb.Type,
		"front_end": map[string]any{"port": lb.FrontPort, "ip_address": nullable(lb.FrontIP), "tls": tls},
		"back_end":  map[string]any{"serverpool_id": lb.PoolID, "target_port": lb.TargetPort}}, nil
}

func (s *Sim) updateLoadBalancer(c *call) (any, error) {
	cs, lb, err := s.loadBalancerFor(c, PermUpdate)
	if err != nil {
		return nil, err
	}
	next, err := s.loadBalancerFromBody(c, cs, lb.ID)
	if err != nil {
		return nil, err
	}
	next.ID = lb.ID
	s.st.LoadBalancers[lb.ID] = next
	return success(), nil
}

func (s *Sim) deleteLoadBalancer(c *call) (any, error) {
	_, lb, err := s.loadBalancerFor(c, PermDelete)
	if err != nil {
		return nil, err
	}
	delete(s.st.LoadBalancers, lb.ID)
	return success(), nil
}
