package vcosim

import (
	"net/http"
	"slices"
)

func (s *Sim) antiAffinityRoutes() []*route {
	const base = "/customers/{customer_id}/cloudspaces/{cloudspace_id}/anti-affinity-groups"
	get, post, put, del := http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete
	return []*route{
		{Route: Route{Method: get, Base: apiBase, Path: base}, handle: s.listGroups},
		{Route: Route{Method: post, Base: apiBase, Path: base, Query: []string{"spread", "group_id"}}, handle: s.createGroup},
		{Route: Route{Method: get, Base: apiBase, Path: base + "/{group_id}"}, handle: s.getGroup},
		{Route: Route{Method: put, Base: apiBase, Path: base + "/{group_id}", Query: []string{"spread"}}, handle: s.updateGroup},
		{Route: Route{Method: del, Base: apiBase, Path: base + "/{group_id}"}, handle: s.deleteGroup},
		{Route: Route{Method: get, Base: apiBase, Path: base + "/{group_id}/vms"}, handle: s.listGroupVMs},
		{Route: Route{Method: post, Base: apiBase, Path: base + "/{group_id}/vms", Query: []string{"vm_id"}}, handle: s.addGroupVM},
		{Route: Route{Method: del, Base: apiBase, Path: base + "/{group_id}/vms/{vm_id}"}, handle: s.removeGroupVM},
	}
}

func groupKey(cs, id string) string { return cs + "/" + id }

// wireGroup: a group without VMs is INCOMPLETE, as seen on the platform.
func wireGroup(g *AntiAffinityGroup) map[string]any {
	status := "OK"
	if len(g.VMs) == 0 {
		status = "INCOMPLETE"
	}
	return map[string]any{"group_id": g.ID, "spread": g.Spread, "status": status}
}

func (s *Sim) listGroups(c *call) (any, error) {
	cs, err := c.cloudspace(PermRead)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, g := range sortedValues(s.st.AntiAffinity) {
		if g.CloudspaceID == cs.ID {
			out = append(out, wireGroup(g))
		}
	}
	return list(out), nil
}

// createGroup: the caller picks the id; a second create of the same id is a 409.
func (s *Sim) createGroup(c *call) (any, error) {
	cs, err := c.cloudspace(PermCreate)
	if err != nil {
		return nil, err
	}
	g := &AntiAffinityGroup{CloudspaceID: cs.ID, ID: c.reqStr("group_id"), Spread: c.reqInt("spread"), VMs: []int{}}
	if err := c.validation(); err != nil {
		return nil, err
	}
	if g.ID == "" || (g.Spread < 1 && g.Spread != -1) {
		return nil, badRequest("Bad Request: group_id must be set and spread must be positive or -1 (infinite)")
	}
	if s.st.AntiAffinity[groupKey(cs.ID, g.ID)] != nil {
		return nil, conflict("Conflict: anti-affinity group %s already exists", g.ID)
	}
	s.st.AntiAffinity[groupKey(cs.ID, g.ID)] = g
	return success(), nil
}

func (s *Sim) groupFor(c *call, perm string) (*Cloudspace, *AntiAffinityGroup, error) {
	cs, err := c.cloudspace(perm)
	if err != nil {
		return nil, nil, err
	}
	g := s.st.AntiAffinity[groupKey(cs.ID, c.path("group_id"))]
	if g == nil {
		return nil, nil, notFound("NotFound: anti-affinity group %s not found", c.path("group_id"))
	}
	return cs, g, nil
}

func (s *Sim) getGroup(c *call) (any, error) {
	_, g, err := s.groupFor(c, PermRead)
	if err != nil {
		return nil, err
	}
	return wireGroup(g), nil
}

func (s *Sim) updateGroup(c *call) (any, error) {
	_, g, err := s.groupFor(c, PermUpdate)
	if err != nil {
		return nil, err
	}
	spread := c.reqInt("spread")
	if err := c.validation(); err != nil {
		return nil, err
	}
	g.Spread = spread
	return success(), nil
}

func (s *Sim) deleteGroup(c *call) (any, error) {
	cs, g, err := s.groupFor(c, PermDelete)
	if err != nil {
		return nil, err
	}
	delete(s.st.AntiAffinity, groupKey(cs.ID, g.ID))
	return success(), nil
}

func (s *Sim) listGroupVMs(c *call) (any, error) {
	_, g, err := s.groupFor(c, PermRead)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, id := range g.VMs {
		out = append(out, map[string]any{"vm_id": id, "status": s.st.VMs[id].Status})
	}
	return map[string]any{"vms": out}, nil
}

func (s *Sim) addGroupVM(c *call) (any, error) {
	cs, g, err := s.groupFor(c, PermUpdate)
	if err != nil {
		return nil, err
	}
	id := c.reqInt("vm_id")
	if err := c.validation(); err != nil {
		return nil, err
	}
	vm := s.st.VMs[id]
	if vm == nil || vm.CloudspaceID != cs.ID || vm.Status == statusDestroyed {
		return nil, notFound("NotFound: Virtual machine %d not found in cloudspace %s", id, cs.ID)
	}
	if !slices.Contains(g.VMs, id) {
		g.VMs = append(g.VMs, id)
	}
	return success(), nil
}

func (s *Sim) removeGroupVM(c *call) (any, error) {
	_, g, err := s.groupFor(c, PermUpdate)
	if err != nil {
		return nil, err
	}
	id, err := c.pathInt("vm_id")
	if err != nil {
		return nil, err
	}
	if !slices.Contains(g.VMs, id) {
		return nil, notFound("NotFound: Virtual machine %d is not in anti-affinity group %s", id, g.ID)
	}
	g.VMs = slices.DeleteFunc(g.VMs, func(v int) bool { return v == id })
	return success(), nil
}
