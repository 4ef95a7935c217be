package vco

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// The API has no idempotency key and allows duplicate names, and a create that times out may
// still finish on the platform. So callers name things deterministically and create through
// these Ensure* helpers: look the name up, create only when it is absent, and after a create
// whose outcome is unknown (timeout, 5xx) look it up again instead of creating twice.

// ensure runs that protocol. find must return ErrNotFound when the name is absent.
func ensure[T any](find func() (T, error), create func() error) (T, bool, error) {
	v, err := find()
	if !errors.Is(err, ErrNotFound) {
		return v, false, err
	}
	cerr := create()
	if cerr != nil && !unknownOutcome(cerr) {
		return v, false, cerr
	}
	v, err = find()
	switch {
	case err == nil:
		return v, true, nil
	case errors.Is(err, ErrNotFound) && cerr != nil:
		return v, false, cerr
	case errors.Is(err, ErrNotFound):
		return v, false, fmt.Errorf("vco: created, but the lookup by name does not find it yet: %w", ErrUnavailable)
	}
	return v, false, err
}

// unknownOutcome: the request may have been carried out.
func unknownOutcome(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrServer)
}

func gone(status string) bool {
	return strings.EqualFold(status, "DELETED") || strings.EqualFold(status, "DESTROYED")
}

// FindCloudspace looks a live cloudspace up by name in a location. A partial list (the
// location did not answer) is an error, never "not found".
func (c *Client) FindCloudspace(ctx context.Context, location, name string) (Cloudspace, error) {
	all, err := c.ListCloudspaces(ctx, ListCloudspacesOptions{Locations: []string{location}})
	if err != nil {
		return Cloudspace{}, err
	}
	var live []Cloudspace
	for _, cs := range all {
		if cs.Location == location && !gone(cs.Status) {
			live = append(live, cs)
		}
	}
	return unique(live, name, "cloudspace", func(cs Cloudspace) (string, string) { return cs.Name, cs.ID })
}

// EnsureCloudspace returns the cloudspace named req.Name in req.Location, creating it when
// absent; created reports which.
func (c *Client) EnsureCloudspace(ctx context.Context, req CreateCloudspaceRequest) (Cloudspace, bool, error) {
	return ensure(
		func() (Cloudspace, error) { return c.FindCloudspace(ctx, req.Location, req.Name) },
		func() error { _, err := c.CreateCloudspace(ctx, req); return err },
	)
}

// EnsureVM returns the VM named req.Name in the cloudspace, creating it when absent.
func (c *Client) EnsureVM(ctx context.Context, cloudspaceID string, req CreateVMRequest) (VM, bool, error) {
	return c.EnsureVMListed(ctx, cloudspaceID, req, func(ctx context.Context) ([]VM, error) { return c.ListVMs(ctx, cloudspaceID, false) })
}

// EnsureVMListed is EnsureVM with the cloudspace's VM listing (without the recycle bin) read by
// list, which may share one listing among callers that asked at the same time.
func (c *Client) EnsureVMListed(ctx context.Context, cloudspaceID string, req CreateVMRequest, list func(context.Context) ([]VM, error)) (VM, bool, error) {
	find := func() (VM, error) {
		vms, err := list(ctx)
		if err != nil {
			return VM{}, err
		}
		return unique(vms, req.Name, "VM", func(v VM) (string, string) { return v.Name, fmt.Sprint(v.ID) })
	}
	return ensure(find, func() error { _, err := c.CreateVM(ctx, cloudspaceID, req); return err })
}

// EnsureServerPool returns the pool with this name, creating it when absent.
func (c *Client) EnsureServerPool(ctx context.Context, cloudspaceID, name, description string) (ServerPool, bool, error) {
	find := func() (ServerPool, error) {
		pools, err := c.ListServerPools(ctx, cloudspaceID)
		if err != nil {
			return ServerPool{}, err
		}
		p, err := unique(pools, name, "server pool", func(p ServerPool) (string, string) { return p.Name, p.ID })
		if err != nil {
			return p, err
		}
		return c.GetServerPool(ctx, cloudspaceID, p.ID)
	}
	return ensure(find, func() error { _, err := c.CreateServerPool(ctx, cloudspaceID, name, description); return err })
}

// EnsureLoadBalancer makes the load balancer named spec.Name match spec: created when
// absent, updated when it differs.
func (c *Client) EnsureLoadBalancer(ctx context.Context, cloudspaceID string, spec LoadBalancerSpec) (LoadBalancer, bool, error) {
	find := func() (LoadBalancer, error) {
		lbs, err := c.ListLoadBalancers(ctx, cloudspaceID)
		if err != nil {
			return LoadBalancer{}, err
		}
		lb, err := unique(lbs, spec.Name, "load balancer", func(l LoadBalancer) (string, string) { return l.Name, l.ID })
		if err != nil {
			return lb, err
		}
		return c.GetLoadBalancer(ctx, cloudspaceID, lb.ID)
	}
	lb, created, err := ensure(find, func() error { _, err := c.CreateLoadBalancer(ctx, cloudspaceID, spec); return err })
	if err != nil || created || sameLB(lb, spec) {
		return lb, created, err
	}
	if err := c.UpdateLoadBalancer(ctx, cloudspaceID, lb.ID, spec); err != nil {
		return lb, false, err
	}
	lb, err = c.GetLoadBalancer(ctx, cloudspaceID, lb.ID)
	return lb, false, err
}

func sameLB(lb LoadBalancer, spec LoadBalancerSpec) bool {
	return strings.EqualFold(lb.Type, spec.Type) && lb.FrontEnd.Port == spec.FrontEnd.Port &&
		lb.FrontEnd.IPAddress == spec.FrontEnd.IPAddress && lb.BackEnd == spec.BackEnd
}

// EnsureCloudspaceDNSRecord creates a record unless one of that name and type (and value,
// for types where the value is not derived) exists. DNS writes are slow, so this saves
// ~30 s per record on every reconcile.
func (c *Client) EnsureCloudspaceDNSRecord(ctx context.Context, cloudspaceID string, spec DNSRecordSpec) (bool, error) {
	typ := strings.ToUpper(spec.Type)
	if typ == "" {
		typ = "A"
	}
	find := func() (DNSRecord, error) {
		recs, err := c.ListCloudspaceDNSRecords(ctx, cloudspaceID)
		if err != nil {
			return DNSRecord{}, err
		}
		for _, r := range recs {
			if strings.EqualFold(strings.TrimSuffix(r.Domain, "."), strings.TrimSuffix(spec.Domain, ".")) && r.Type == typ &&
				(typ == "A" || typ == "AAAA" || r.Value == spec.Value) {
				return r, nil
			}
		}
		return DNSRecord{}, fmt.Errorf("vco: no %s record %s: %w", typ, spec.Domain, ErrNotFound)
	}
	_, created, err := ensure(find, func() error {
		err := c.CreateCloudspaceDNSRecord(ctx, cloudspaceID, spec)
		if errors.Is(err, ErrConflict) {
			return nil // written meanwhile: the second lookup finds it
		}
		return err
	})
	return created, err
}

// EnsureAttachedVGPU returns the reservation with this name attached to the VM: found
// attached, found unattached and attached now, found in the recycle bin and restored and
// attached (it is billed there too: reserving another would bill twice), or reserved and
// attached. A reservation of that name attached to another VM is ErrConflict; several of that
// name are ErrAmbiguous.
func (c *Client) EnsureAttachedVGPU(ctx context.Context, location, cloudspaceID string, vmID int, profileID, name string) (VGPU, bool, error) {
	find := func() (VGPU, error) {
		found, err := c.FindVGPUs(ctx, location, name)
		if err != nil {
			return VGPU{}, err
		}
		var live, binned []VGPU
		for _, v := range found {
			if gone(v.Status) || v.DeletionTime != nil {
				binned = append(binned, v)
			} else {
				live = append(live, v)
			}
		}
		if len(live) == 0 && len(binned) > 0 {
			v := binned[0]
			if err := c.RestoreVGPU(ctx, location, v.ID); err != nil {
				return VGPU{}, fmt.Errorf("vco: restoring vGPU %s (%s) from the recycle bin: %w", v.Name, v.ID, err)
			}
			v.DeletionTime = nil
			return v, nil
		}
		return unique(live, name, "vGPU", func(v VGPU) (string, string) { return v.Name, v.ID })
	}
	v, created, err := ensure(find, func() error {
		_, err := c.ReserveAndAttachVGPU(ctx, cloudspaceID, vmID, profileID, name)
		return err
	})
	if err != nil || created {
		return v, created, err
	}
	switch {
	case v.Attached() && v.VM.ID == vmID:
		return v, false, nil
	case v.Attached():
		return v, false, fmt.Errorf("vco: vGPU %s (%s) is attached to VM %d, not %d: %w", v.Name, v.ID, v.VM.ID, vmID, ErrConflict)
	}
	if err := c.AttachVGPU(ctx, cloudspaceID, vmID, v.ID); err != nil {
		return v, false, err
	}
	v.VM = &VGPUVM{ID: vmID, CloudspaceID: cloudspaceID}
	return v, false, nil
}
