// Package loadbalancer keeps the control-plane endpoint: the platform L4 load balancer on the
// cloudspace's external address and its server pool, whose members the controller chooses
// (the platform LB has no health checks of its own).
package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-logr/logr"

	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/vco"
)

// API is what this package calls.
type API interface {
	vco.ServerPools
	vco.LoadBalancers
}

// Known are the ids status recorded.
type Known struct{ LoadBalancerID, ServerPoolID string }

// Ensure returns the load balancer and its pool, found by the recorded ids, else by name,
// else created. The pool comes back with its hosts.
func Ensure(ctx context.Context, api API, cloudspaceID, name, address string, port int, known Known) (vco.LoadBalancer, vco.ServerPool, error) {
	if known.LoadBalancerID != "" && known.ServerPoolID != "" {
		pool, perr := api.GetServerPool(ctx, cloudspaceID, known.ServerPoolID)
		lb, lerr := api.GetLoadBalancer(ctx, cloudspaceID, known.LoadBalancerID)
		if perr == nil && lerr == nil && lb.BackEnd.ServerPoolID == pool.ID && lb.FrontEnd.Port == port && lb.FrontEnd.IPAddress == address {
			return lb, pool, nil
		}
		if err := errors.Join(perr, lerr); err != nil && !errors.Is(perr, vco.ErrNotFound) && !errors.Is(lerr, vco.ErrNotFound) {
			return vco.LoadBalancer{}, vco.ServerPool{}, err
		}
		// Changed or deleted out of band: converge by name below.
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("cloudspaceID", cloudspaceID, "name", name)
	pool, created, err := api.EnsureServerPool(ctx, cloudspaceID, name, "control-plane API servers (CAPVCO keeps the members healthy)")
	if err != nil {
		return vco.LoadBalancer{}, vco.ServerPool{}, fmt.Errorf("ensure server pool %s: %w", name, err)
	}
	if created {
		log.Info("Created server pool", "serverPoolID", pool.ID)
	}
	lb, created, err := api.EnsureLoadBalancer(ctx, cloudspaceID, vco.LoadBalancerSpec{
		Name: name, Description: "Kubernetes API (CAPVCO)", Type: "TCP",
		FrontEnd: vco.LBFrontEnd{Port: port, IPAddress: address},
		BackEnd:  vco.LBBackEnd{ServerPoolID: pool.ID, TargetPort: decide.DefaultAPIServerPort},
	})
	if err != nil {
		return vco.LoadBalancer{}, vco.ServerPool{}, fmt.Errorf("ensure load balancer %s: %w", name, err)
	}
	if created {
		log.Info("Created load balancer", "loadBalancerID", lb.ID, "address", address, "port", port)
	}
	return lb, pool, nil
}

// SyncMembers makes the pool's hosts exactly healthy and returns the members now in it. A
// steady pool costs no call.
func SyncMembers(ctx context.Context, api API, cloudspaceID string, pool vco.ServerPool, healthy []string) ([]string, error) {
	add, remove := decide.PoolDelta(pool.Hosts, healthy)
	log := logr.FromContextOrDiscard(ctx).WithValues("cloudspaceID", cloudspaceID, "serverPoolID", pool.ID)
	members := map[string]bool{}
	for _, h := range pool.Hosts {
		members[h.Address] = true
	}
	var errs []error
	for _, h := range remove {
		if err := api.RemovePoolHost(ctx, cloudspaceID, pool.ID, h.ID); err != nil && !errors.Is(err, vco.ErrNotFound) {
			errs = append(errs, fmt.Errorf("remove %s from pool %s: %w", h.Address, pool.ID, err))
			continue
		}
		log.Info("Removed server pool member", "address", h.Address)
		if !slices.ContainsFunc(pool.Hosts, func(o vco.PoolHost) bool { return o.ID != h.ID && o.Address == h.Address }) {
			delete(members, h.Address)
		}
	}
	for _, a := range add {
		if _, err := api.AddPoolHost(ctx, cloudspaceID, pool.ID, a); err != nil && !errors.Is(err, vco.ErrConflict) {
			errs = append(errs, fmt.Errorf("add %s to pool %s: %w", a, pool.ID, err))
			continue
		}
		log.Info("Added server pool member", "address", a)
		members[a] = true
	}
	out := make([]string, 0, len(members))
	for a := range members {
		out = append(out, a)
	}
	slices.Sort(out)
	return out, errors.Join(errs...)
}

// Delete deletes every load balancer and pool called name in the cloudspace. gone=true when
// none is left.
func Delete(ctx context.Context, api API, cloudspaceID, name string) (bool, error) {
	log := logr.FromContextOrDiscard(ctx).WithValues("cloudspaceID", cloudspaceID, "name", name)
	lbs, err := api.ListLoadBalancers(ctx, cloudspaceID)
	if err != nil {
		return goneIfNotFound(err)
	}
	for _, lb := range lbs {
		if lb.Name == name {
			if err := api.DeleteLoadBalancer(ctx, cloudspaceID, lb.ID); err != nil && !errors.Is(err, vco.ErrNotFound) {
				return false, fmt.Errorf("delete load balancer %s: %w", lb.ID, err)
			}
			log.Info("Deleted load balancer", "loadBalancerID", lb.ID)
		}
	}
	pools, err := api.ListServerPools(ctx, cloudspaceID)
	if err != nil {
		return goneIfNotFound(err)
	}
	for _, p := range pools {
		if p.Name == name {
			if err := api.DeleteServerPool(ctx, cloudspaceID, p.ID); err != nil && !errors.Is(err, vco.ErrNotFound) {
				return false, fmt.Errorf("delete server pool %s: %w", p.ID, err)
			}
			log.Info("Deleted server pool", "serverPoolID", p.ID)
		}
	}
	return true, nil
}

// goneIfNotFound: a cloudspace that is gone has no load balancer left.
func goneIfNotFound(err error) (bool, error) {
	if errors.Is(err, vco.ErrNotFound) {
		return true, nil
	}
	return false, err
}
