package vcosim

import (
	"net/http"
	"slices"
	"time"
)

func (s *Sim) connectedRoutes() []*route {
	const base = "/customers/{customer_id}/cloudspaces/{cloudspace_id}/connected-cloudspaces"
	ips := []string{"remote_cloudspace_ip", "local_cloudspace_ip"}
	return []*route{
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: base}, handle: s.listConnected},
		{Route: Route{Method: http.MethodPost, Base: apiBase, Path: base, Query: append([]string{"connected_cloudspace_id"}, ips...)}, status: http.StatusCreated, handle: s.connect},
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: base + "/{connected_cloudspace_id}"}, handle: s.connectionStatus},
		{Route: Route{Method: http.MethodDelete, Base: apiBase, Path: base + "/{connected_cloudspace_id}", Query: ips}, status: http.StatusNoContent, handle: s.disconnect},
	}
}

func (s *Sim) linkBetween(a, b string) *Link {
	for _, l := range s.st.Links {
		if (l.A == a && l.B == b) || (l.A == b && l.B == a) {
			return l
		}
	}
	return nil
}

func (s *Sim) listConnected(c *call) (any, error) {
	cs, err := c.cloudspace(PermRead)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, l := range s.st.Links {
		other, local, remote := l.B, l.AIP, l.BIP
		if l.B == cs.ID {
			other, local, remote = l.A, l.BIP, l.AIP
		} else if l.A != cs.ID {
			continue
		}
		o := s.st.Cloudspaces[other]
		out = append(out, map[string]any{"cloudspace_id": o.ID, "name": o.Name, "location": o.Location,
			"local_public_address": local, "remote_public_address": remote, "remote_private_network": o.PrivateNetwork})
	}
	return list(out), nil
}

// remote resolves {connected_cloudspace_id} or the query argument, with the swagger's codes:
// 404 when it does not exist, 403 without access to it.
func (s *Sim) remote(c *call, id, perm string) (*Cloudspace, error) {
	o := s.st.Cloudspaces[id]
	if o == nil || o.Customer != c.principal.Customer || o.Status == statusDestroyed {
		return nil, notFound("One or both of the cloudspaces not found")
	}
	if !c.principal.can(perm, resource{location: o.Location, cloudspace: o.ID}) {
		return nil, forbidden("Forbidden, no access to target cloudspace")
	}
	return o, nil
}

// connect makes one symmetric link; the link reports UNKNOWN until LinkConnect has passed.
func (s *Sim) connect(c *call) (any, error) {
	cs, err := c.cloudspace(PermUpdate)
	if err != nil {
		return nil, err
	}
	otherID, remoteIP, localIP := c.reqStr("connected_cloudspace_id"), c.reqStr("remote_cloudspace_ip"), c.reqStr("local_cloudspace_ip")
	if err := c.validation(); err != nil {
		return nil, err
	}
	o, err := s.remote(c, otherID, PermUpdate)
	if err != nil {
		return nil, err
	}
	switch {
	case o.ID == cs.ID:
		return nil, badRequest("Bad Request: a cloudspace cannot be connected to itself")
	case !s.hasPublicIP(cs, localIP):
		return nil, badRequest("Bad Request: local_cloudspace_ip %s is not an external IP of cloudspace %s", localIP, cs.ID)
	case !s.hasPublicIP(o, remoteIP):
		return nil, badRequest("Bad Request: remote_cloudspace_ip %s is not an external IP of cloudspace %s", remoteIP, o.ID)
	case s.linkBetween(cs.ID, o.ID) != nil:
		return nil, conflict("Conflict, connection already exists")
	}
	s.st.Links = append(s.st.Links, &Link{A: cs.ID, B: o.ID, AIP: localIP, BIP: remoteIP, Created: c.now().UnixMilli()})
	return nil, nil
}

func (s *Sim) connectionStatus(c *call) (any, error) {
	cs, err := c.cloudspace(PermRead)
	if err != nil {
		return nil, err
	}
	l := s.linkBetween(cs.ID, c.path("connected_cloudspace_id"))
	if l == nil {
		return nil, notFound("NotFound: cloudspace %s is not connected to %s", cs.ID, c.path("connected_cloudspace_id"))
	}
	status := "UNKNOWN"
	if c.now().Sub(time.UnixMilli(l.Created)) >= s.scaled(s.delays.LinkConnect) {
		status = "CONNECTED"
	}
	return map[string]string{"status": status}, nil
}

// disconnect is idempotent (204 when there was no link) but, like the platform's VPN teardown,
// fails now and then with a 400 or 500 and leaves the link in place.
func (s *Sim) disconnect(c *call) (any, error) {
	cs, err := c.cloudspace(PermUpdate)
	if err != nil {
		return nil, err
	}
	_, _ = c.reqStr("remote_cloudspace_ip"), c.reqStr("local_cloudspace_ip")
	if err := c.validation(); err != nil {
		return nil, err
	}
	otherID := c.path("connected_cloudspace_id")
	if o := s.st.Cloudspaces[otherID]; o != nil && !c.principal.can(PermUpdate, resource{location: o.Location, cloudspace: o.ID}) {
		return nil, forbidden("No Access to specified remote cloudspace")
	}
	l := s.linkBetween(cs.ID, otherID)
	if l == nil {
		return nil, nil
	}
	if rate := s.opts.LinkDeleteFailureRate; rate > 0 && s.rng.Float64() < rate {
		if s.rng.IntN(2) == 0 {
			return nil, badRequest("Bad Request: failed to remove the VPN link on the remote gateway")
		}
		return nil, errf(http.StatusInternalServerError, "G8Error: timeout while reconfiguring the virtual gateway")
	}
	s.st.Links = slices.DeleteFunc(s.st.Links, func(x *Link) bool { return x == l })
	return nil, nil
}
