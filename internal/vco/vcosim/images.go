package vcosim

import (
	"net/http"
	"strings"
)

func (s *Sim) imageRoutes() []*route {
	const base = "/customers/{customer_id}/locations/{location}/vm-images"
	return []*route{
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: base, Query: []string{"include_logo"}}, handle: s.listImages},
		{Route: Route{Method: http.MethodPost, Base: apiBase, Path: base, Query: []string{
			"name", "url", "memory", "boot_disk_size", "add_memory", "add_vcpu", "remove_vcpu", "add_disk", "remove_disk",
			"add_nic", "remove_nic", "username", "password", "user_data", "tags", "md5_sum", "boot_type", "os_name", "os_type"}}, handle: s.createImage},
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: base + "/{image_id}", Query: []string{"include_logo"}}, handle: s.getImage},
		{Route: Route{Method: http.MethodDelete, Base: apiBase, Path: base + "/{image_id}", Query: []string{"permanently"}}, handle: s.deleteImage},
		// Operator endpoint (not in the customer swagger): publishing makes an image public,
		// visible to every customer of the location.
		{Route: Route{Method: http.MethodPut, Base: apiBase, Path: "/admin/locations/{location}/vm-images/{image_id}/public"}, auth: authOperator, handle: s.publishImage},
	}
}

func visibleImage(img *Image, customer, location string) bool {
	return img.Location == location && img.DeletedAt == nil && (img.Public || img.Customer == customer)
}

func (s *Sim) listImages(c *call) (any, error) {
	cu, loc, err := c.location(PermRead)
	if err != nil {
		return nil, err
	}
	_ = c.boolean("include_logo", false)
	if err := c.validation(); err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, img := range sortedValues(s.st.Images) {
		if !visibleImage(img, cu.ID, loc.Name) {
			continue
		}
		out = append(out, map[string]any{
			"image_id": img.ID, "status": img.Status, "name": img.Name, "description": img.Description, "os_type": img.OSType,
			"boot_disk_size": img.BootDiskSize, "size": img.BootDiskSize, "memory": img.Memory, "tags": img.Tags, "public": img.Public,
			"categories": nil, "docs_url": nil, "logo": nil,
		})
	}
	return list(out), nil
}

func (s *Sim) imageFor(c *call, perm string) (*Customer, *Image, error) {
	return s.imageWhere(c, perm, visibleImage)
}

// imageWhere resolves the route's image among those ok accepts for the customer and location.
func (s *Sim) imageWhere(c *call, perm string, ok func(img *Image, customer, location string) bool) (*Customer, *Image, error) {
	cu, loc, err := c.location(perm)
	if err != nil {
		return nil, nil, err
	}
	id, err := c.pathInt("image_id")
	if err != nil {
		return nil, nil, err
	}
	img := s.st.Images[id]
	if img == nil || !ok(img, cu.ID, loc.Name) {
		return nil, nil, notFound("NotFound: Image %d does not exist in location %s", id, loc.Name)
	}
	return cu, img, nil
}

// recycledImage is the customer's soft-deleted image at the route's location and id.
func (s *Sim) recycledImage(c *call) (*Customer, *Image, error) {
	return s.imageWhere(c, PermDelete, func(img *Image, customer, location string) bool {
		return img.Location == location && img.DeletedAt != nil && img.Customer == customer
	})
}

func (s *Sim) getImage(c *call) (any, error) {
	_, img, err := s.imageFor(c, PermRead)
	if err != nil {
		return nil, err
	}
	_ = c.boolean("include_logo", false)
	if err := c.validation(); err != nil {
		return nil, err
	}
	caps := map[string]bool{"add_memory": true, "add_vcpu": true, "remove_vcpu": true, "add_disk": true, "remove_disk": true, "add_nic": true, "remove_nic": true}
	return map[string]any{
		"image_id": img.ID, "status": img.Status, "name": img.Name, "description": img.Description, "os_type": img.OSType,
		"os_name": img.OSName, "boot_disk_size": img.BootDiskSize, "boot_type": img.BootType, "size": img.BootDiskSize,
		"memory": img.Memory, "tags": img.Tags, "capabilities": caps, "meneja_image_id": nil, "categories": []string{},
		"docs_url": nil, "user_data_templates": []any{}, "logo": nil,
	}, nil
}

// createImage registers a customer image from a URL. The swagger gives no body for the 200;
// the simulator answers {"image_id": N} and clients must also cope with an empty body.
func (s *Sim) createImage(c *call) (any, error) {
	cu, loc, err := c.location(PermCreate)
	if err != nil {
		return nil, err
	}
	img := &Image{
		Location: loc.Name, Customer: cu.ID, Name: c.reqStr("name"), URL: c.reqStr("url"), Memory: c.reqInt("memory"),
		BootDiskSize: c.reqInt("boot_disk_size"), BootType: c.reqStr("boot_type"), OSName: c.reqStr("os_name"), OSType: c.reqStr("os_type"),
		Status: "CREATING",
	}
	for _, flag := range []string{"add_memory", "add_vcpu", "remove_vcpu", "add_disk", "remove_disk", "add_nic", "remove_nic"} {
		_ = c.boolean(flag, true)
	}
	for _, ignored := range []string{"username", "password", "user_data", "md5_sum"} {
		_ = c.str(ignored)
	}
	if t := c.str("tags"); t != "" {
		img.Tags = &t
	}
	if err := c.validation(); err != nil {
		return nil, err
	}
	if err := c.requireCustomerAdmin("publishing images"); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(img.URL, "http://") && !strings.HasPrefix(img.URL, "https://") {
		return nil, badRequest("Bad Request: url must be an http(s) URL the location can download from")
	}
	img.ID = s.st.intID()
	s.st.Images[img.ID] = img
	c.slow(s.delays.DiskCreate)
	img.Status = "CREATED"
	return map[string]int{"image_id": img.ID}, nil
}

func (s *Sim) deleteImage(c *call) (any, error) {
	permanently := c.boolean("permanently", false)
	cu, img, err := s.imageFor(c, PermDelete)
	if err != nil && permanently {
		// A soft-deleted image sits in the recycle bin: it is not visible any more, but a
		// permanent delete purges it.
		cu, img, err = s.recycledImage(c)
	}
	if err != nil {
		return nil, err
	}
	if err := c.validation(); err != nil {
		return nil, err
	}
	if err := c.requireCustomerAdmin("deleting images"); err != nil {
		return nil, err
	}
	if img.Customer != cu.ID {
		return nil, forbidden("Forbidden: image %d is an operator image; only the operator can remove it", img.ID)
	}
	if permanently {
		delete(s.st.Images, img.ID)
		return success(), nil
	}
	now := c.now().Unix()
	img.DeletedAt, img.Status = &now, statusDeleted
	return success(), nil
}

func (s *Sim) publishImage(c *call) (any, error) {
	id, err := c.pathInt("image_id")
	if err != nil {
		return nil, err
	}
	img := s.st.Images[id]
	if img == nil || img.Location != c.path("location") || img.DeletedAt != nil {
		return nil, notFound("NotFound: Image %d does not exist in location %s", id, c.path("location"))
	}
	img.Public, img.Customer = true, ""
	return success(), nil
}
