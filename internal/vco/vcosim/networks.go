package vcosim

import (
	"net/http"
	"strconv"
)

func (s *Sim) networkRoutes() []*route {
	const loc = "/customers/{customer_id}/locations/{location}/external-networks"
	const cs = "/customers/{customer_id}/cloudspaces/{cloudspace_id}/external-networks"
	return []*route{
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: loc}, handle: s.listExternalNetworks},
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: loc + "/{external_network_id}"}, handle: s.getExternalNetwork},
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: cs}, handle: s.listPublicIPs},
		{Route: Route{Method: http.MethodPost, Base: apiBase, Path: cs, Query: []string{"metric", "external_network_ip", "external_network_id", "external_network_type"}}, handle: s.addPublicIP},
		{Route: Route{Method: http.MethodDelete, Base: apiBase, Path: cs, Query: []string{"external_network_ip", "external_network_id"}}, handle: s.removePublicIP},
	}
}

func wireExternalNetwork(n *ExternalNetwork) map[string]any {
	return map[string]any{"external_network_id": n.ID, "network": n.Prefix + ".0", "gateway": n.Gateway, "dhcp": false,
		"subnet_mask": "255.255.255.0", "name": n.Name, "public": n.Public}
}

func (s *Sim) listExternalNetworks(c *call) (any, error) {
	_, loc, err := c.location(PermRead)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, n := range loc.ExternalNetworks {
		out = append(out, wireExternalNetwork(n))
	}
	return list(out), nil
}

func (s *Sim) getExternalNetwork(c *call) (any, error) {
	_, loc, err := c.location(PermRead)
	if err != nil {
		return nil, err
	}
	id, err := c.pathInt("external_network_id")
	if err != nil {
		return nil, err
	}
	for _, n := range loc.ExternalNetworks {
		if n.ID == id {
			return wireExternalNetwork(n), nil
		}
	}
	return nil, notFound("NotFound: External network %d not found in location %s", id, loc.Name)
}

func (s *Sim) listPublicIPs(c *call) (any, error) {
	cs, err := c.cloudspace(PermRead)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, ip := range cs.PublicIPs {
		out = append(out, map[string]any{"external_network_ip": ip.IP, "metric": ip.Metric,
			"external_network_id": strconv.Itoa(ip.ExternalNetworkID), "type": "external"})
	}
	return list(out), nil
}

// addPublicIP adds an uplink (and so a public IP) to a cloudspace.
func (s *Sim) addPublicIP(c *call) (any, error) {
	cs, err := c.cloudspace(PermUpdate)
	if err != nil {
		return nil, err
	}
	rawID, typ, want := c.reqStr("external_network_id"), c.reqStr("external_network_type"), c.str("external_network_ip")
	metric := c.int("metric", 0)
	if err := c.validation(); err != nil {
		return nil, err
	}
	if typ != "external" {
		return nil, badRequest("Bad Request: the simulator supports external_network_type=external only")
	}
	id, err := strconv.Atoi(rawID)
	if err != nil {
		return nil, badRequest("Bad Request: external_network_id must be an external network id")
	}
	if cs.Private {
		return nil, badRequest("Bad Request: a private cloudspace has no external interface")
	}
	if cs.Quota[3] >= 0 && len(cs.PublicIPs) >= cs.Quota[3] {
		return nil, badRequest("Bad Request: ResourceLimitExceededError: public IP quota of cloudspace %s exceeded", cs.ID)
	}
	n, err := s.externalNetwork(cs.Location, &id)
	if err != nil {
		return nil, err
	}
	ip, err := allocateIP(n, cs.ID, want)
	if err != nil {
		return nil, err
	}
	cs.PublicIPs = append(cs.PublicIPs, PublicIP{ExternalNetworkID: id, IP: ip, Metric: metric})
	return map[string]any{"success": true, "external_network_id": id, "external_network_ip": ip, "metric": metric}, nil
}

func (s *Sim) removePublicIP(c *call) (any, error) {
	cs, err := c.cloudspace(PermUpdate)
	if err != nil {
		return nil, err
	}
	ip, rawID := c.reqStr("external_network_ip"), c.reqStr("external_network_id")
	if err := c.validation(); err != nil {
		return nil, err
	}
	for i, p := range cs.PublicIPs {
		if p.IP != ip || strconv.Itoa(p.ExternalNetworkID) != rawID {
			continue
		}
		if i == 0 {
			return nil, badRequest("Bad Request: %s is the cloudspace's primary external IP and cannot be removed", ip)
		}
		for _, pf := range s.st.PortForwards {
			if pf.CloudspaceID == cs.ID && pf.PublicIP == ip {
				return nil, conflict("Conflict: port forward %s still uses %s", pf.ID, ip)
			}
		}
		for _, lb := range s.st.LoadBalancers {
			if lb.CloudspaceID == cs.ID && lb.FrontIP == ip {
				return nil, conflict("Conflict: load balancer %s still uses %s", lb.ID, ip)
			}
		}
		for _, n := range s.st.Locations[cs.Location].ExternalNetworks {
			if n.ID == p.ExternalNetworkID {
				delete(n.Used, ip)
			}
		}
		cs.PublicIPs = append(cs.PublicIPs[:i], cs.PublicIPs[i+1:]...)
		return success(), nil
	}
	return nil, notFound("NotFound: %s is not an external IP of cloudspace %s", ip, cs.ID)
}
