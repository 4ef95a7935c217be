package vcosim

import (
	"net/http"
	"sort"
	"strconv"
)

// Status values. The swagger lists none; these are the ones seen on the real platform or
// inherited from OpenvCloud (reference/vco-api.md §6.2).
const (
	statusDeploying = "DEPLOYING"
	statusDeployed  = "DEPLOYED"
	statusRunning   = "RUNNING"
	statusHalted    = "HALTED"
	statusDeleted   = "DELETED"
	statusDestroyed = "DESTROYED"
)

func (s *Sim) accountRoutes() []*route {
	get := http.MethodGet
	return []*route{
		{Route: Route{Method: get, Base: apiBase, Path: "/me"}, handle: s.getMe},
		{Route: Route{Method: get, Base: apiBase, Path: "/me/jwt"}, handle: s.getMeJWT},
		{Route: Route{Method: get, Base: apiBase, Path: "/locations"}, handle: s.listLocations},
		{Route: Route{Method: get, Base: apiBase, Path: "/customers/{customer_id}/locations"}, handle: s.listCustomerLocations},
		{Route: Route{Method: get, Base: apiBase, Path: "/customers/{customer_id}/locations/{location}"}, handle: s.getCustomerLocation},
		{Route: Route{Method: get, Base: apiBase, Path: "/customers/{customer_id}/recycle-bin"}, handle: s.recycleBin},
		{Route: Route{Method: get, Base: apiBase, Path: "/customers/{customer_id}/service-accounts/{service_account_id}/jwt"}, handle: s.serviceAccountJWT},
	}
}

type wireUserCustomer struct {
	CustomerID  string  `json:"customer_id"`
	Name        string  `json:"name"`
	Address     string  `json:"address"`
	PhoneNumber string  `json:"phone_number"`
	Status      *string `json:"status"`
}

func (s *Sim) getMe(c *call) (any, error) {
	p := c.principal
	cu := s.st.Customers[p.Customer]
	entry := wireUserCustomer{CustomerID: cu.ID, Name: cu.Name, Address: "", PhoneNumber: ""}
	admins := []wireUserCustomer{}
	if p.CustomerAdmin {
		admins = append(admins, entry)
	}
	return map[string]any{
		"username": p.Name, "firstname": nil, "lastname": nil, "email": nil, "emails": []string{},
		"is_admin": p.Operator, "iam_domain": c.r.Host + iamBase,
		"vco_website": nil, "vco_name": "vcosim", "vco_support_email": nil,
		"customers": []wireUserCustomer{entry}, "admin_of_customers": admins,
	}, nil
}

// getMeJWT answers the caller's token as a JSON string, as /me/jwt does.
func (s *Sim) getMeJWT(c *call) (any, error) {
	tok, err := s.sign(c.principal, 0)
	if err != nil {
		return nil, err
	}
	return tok, nil
}

func (s *Sim) serviceAccountJWT(c *call) (any, error) {
	cu, err := c.customer()
	if err != nil {
		return nil, err
	}
	if err := c.requireCustomerAdmin("issuing service-account tokens"); err != nil {
		return nil, err
	}
	p := s.st.Principals[c.path("service_account_id")]
	if p == nil || p.Customer != cu.ID {
		return nil, notFound("NotFound: Service account %s not found", c.path("service_account_id"))
	}
	tok, err := s.sign(p, 0)
	if err != nil {
		return nil, err
	}
	return tok, nil
}

func (s *Sim) listLocations(c *call) (any, error) {
	names := make([]string, 0, len(s.st.Locations))
	for n := range s.st.Locations {
		names = append(names, n)
	}
	sort.Strings(names)
	out := []map[string]any{}
	for _, n := range names {
		l := s.st.Locations[n]
		out = append(out, map[string]any{"name": l.Name, "datacenter": map[string]any{
			"address": nil, "city": l.City, "code": l.Datacenter, "coordinates": nil, "country": l.Country,
			"country_code": l.CountryCode, "created_at": nil, "created_by": nil, "name": l.Datacenter,
		}})
	}
	return list(out), nil
}

func (s *Sim) listCustomerLocations(c *call) (any, error) {
	cu, err := c.customer()
	if err != nil {
		return nil, err
	}
	locs := []map[string]any{}
	for _, l := range cu.Locations {
		locs = append(locs, map[string]any{"location": l, "resources": map[string]float64{
			"su": 0.05, "ou": 0.01, "mu": 2.5, "vcu": 5, "tu": 0.1, "wu": 10, "nu": 1, "piu": 3, "vgu": 250, "fsu": 0.05,
		}})
	}
	return map[string]any{"currency": "EUR", "locations": locs}, nil
}

func (s *Sim) getCustomerLocation(c *call) (any, error) {
	_, loc, err := c.location(PermRead)
	if err != nil {
		return nil, err
	}
	return map[string]any{"location": loc.Name, "storage_only": false}, nil
}

// locationsEnvelope is the "locations" list cross-location answers carry next to "result".
func (s *Sim) locationsEnvelope(cu *Customer) []map[string]string {
	out := []map[string]string{}
	for _, l := range cu.Locations {
		out = append(out, map[string]string{"location": l, "status": "OK"})
	}
	return out
}

func unixString(t *int64) *string {
	if t == nil {
		return nil
	}
	s := strconv.FormatInt(*t, 10)
	return &s
}

func (s *Sim) recycleBin(c *call) (any, error) {
	cu, err := c.customer()
	if err != nil {
		return nil, err
	}
	p := c.principal
	res := map[string]any{"objectspaces": []any{}, "buckets": []any{}, "cdrom_images": []any{}}
	css := []map[string]any{}
	for _, cs := range sortedValues(s.st.Cloudspaces) {
		if cs.Customer == cu.ID && cs.Status == statusDeleted && p.can(PermRead, resource{location: cs.Location, cloudspace: cs.ID}) {
			css = append(css, map[string]any{"cloudspace_name": cs.Name, "cloudspace_id": cs.ID, "location": cs.Location, "deletion_time": unixString(cs.DeletedAt)})
		}
	}
	vms := []map[string]any{}
	for _, vm := range sortedValues(s.st.VMs) {
		cs := s.st.Cloudspaces[vm.CloudspaceID]
		if vm.Customer == cu.ID && vm.Status == statusDeleted && p.can(PermRead, resource{location: cs.Location, cloudspace: cs.ID, vm: vm.ID}) {
			var del *int64
			if vm.DeletedAt != nil {
				d := int64(*vm.DeletedAt)
				del = &d
			}
			vms = append(vms, map[string]any{"vm_name": vm.Name, "vm_id": vm.ID, "cloudspace_name": cs.Name, "cloudspace_id": cs.ID,
				"cloudspace_status": cs.Status, "location": cs.Location, "deletion_time": unixString(del)})
		}
	}
	disks := []map[string]any{}
	for _, d := range sortedValues(s.st.Disks) {
		if d.Customer == cu.ID && d.DeletedAt != nil && p.can(PermRead, resource{location: d.Location, disk: d.ID}) {
			disks = append(disks, map[string]any{"disk_id": d.ID, "disk_name": d.Name, "location": d.Location, "deletion_time": unixString(d.DeletedAt)})
		}
	}
	images := []map[string]any{}
	for _, img := range sortedValues(s.st.Images) {
		if img.Customer == cu.ID && img.DeletedAt != nil && p.can(PermRead, resource{location: img.Location}) {
			images = append(images, map[string]any{"image_id": img.ID, "status": statusDeleted, "image_name": img.Name, "description": img.Description,
				"os_type": img.OSType, "boot_disk_size": img.BootDiskSize, "size": img.BootDiskSize, "memory": img.Memory, "tags": img.Tags, "location": img.Location})
		}
	}
	vgpus := []map[string]any{}
	for _, id := range s.st.VGPUOrder {
		v := s.st.VGPUs[id]
		if v != nil && v.Customer == cu.ID && v.DeletedAt != nil && p.can(PermRead, resource{location: v.Location}) {
			vgpus = append(vgpus, map[string]any{"vgpu_id": v.ID, "vgpu_name": v.Name, "gpu_id": v.GPUID, "description": s.gpuDescription(v),
				"location": v.Location, "deletion_time": unixString(v.DeletedAt)})
		}
	}
	res["cloudspaces"], res["vms"], res["disks"], res["images"], res["vgpus"] = css, vms, disks, images, vgpus
	return map[string]any{"locations": s.locationsEnvelope(cu), "result": res}, nil
}
