package servicelb

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/capx-io/capx/internal/capvco/ccm/instances"
	"github.com/capx-io/capx/internal/capvco/health"
	"github.com/capx-io/capx/internal/capvco/loadbalancer"
	"github.com/capx-io/capx/internal/vco"
)

// API is what this package calls.
type API interface {
	vco.ServerPools
	vco.LoadBalancers
	GetCloudspace(ctx context.Context, id string) (vco.Cloudspace, error)
}

// Balancer keeps the load balancers of the Services of one CAPVCO cluster.
type Balancer struct {
	// Namespace and Cluster are the CAPVCO cluster's, used in every name.
	Namespace, Cluster string
	// Prober checks a member's health port.
	Prober health.Prober
	// ClusterPolicyPort is probed for externalTrafficPolicy Cluster (0: Ready decides).
	ClusterPolicyPort int
}

// ErrNoNodes is returned while no site has a node that can back the Service.
var ErrNoNodes = errors.New("no initialised node can back this Service yet (a node is initialised once the CCM has set its provider ID and zone)")

// Ensure makes the Service's load balancers match the Service in every site that has a
// candidate node, removes them from sites that have none, and returns the addresses they
// listen on, in site order.
func (b Balancer) Ensure(ctx context.Context, api API, sites []instances.Site, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	if err := Unsupported(svc); err != nil {
		return nil, err
	}
	pool := PoolName(b.Namespace, b.Cluster, svc)
	status := &corev1.LoadBalancerStatus{}
	var errs []error
	for _, s := range sites {
		cands := Candidates(nodes, s.Name)
		if len(cands) == 0 {
			if err := b.deleteSite(ctx, api, s, pool); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		ip, err := b.ensureSite(ctx, api, s, svc, pool, cands)
		if err != nil {
			errs = append(errs, fmt.Errorf("site %s: %w", s.Name, err))
		}
		if ip != "" {
			status.Ingress = append(status.Ingress, ingress(ip))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(status.Ingress) == 0 {
		return nil, ErrNoNodes
	}
	return status, nil
}

// ensureSite keeps one cloudspace's pool, members and load balancers; it returns the address
// once the load balancers exist.
func (b Balancer) ensureSite(ctx context.Context, api API, s instances.Site, svc *corev1.Service, pool string, cands []Candidate) (string, error) {
	cs, err := api.GetCloudspace(ctx, s.CloudspaceID)
	if err != nil {
		return "", fmt.Errorf("cloudspace %s: %w", s.CloudspaceID, err)
	}
	ip := cs.ExternalNetworkIP
	if ip == "" {
		return "", fmt.Errorf("cloudspace %s has no external address to listen on", s.CloudspaceID)
	}
	p, _, err := api.EnsureServerPool(ctx, s.CloudspaceID, pool, fmt.Sprintf("nodes backing Service %s/%s (members kept healthy by capvco-cloud-controller-manager)", svc.Namespace, svc.Name))
	if err != nil {
		return "", fmt.Errorf("server pool %s: %w", pool, err)
	}
	if _, err := loadbalancer.SyncMembers(ctx, api, s.CloudspaceID, p, b.healthy(ctx, svc, cands)); err != nil {
		return "", err
	}
	want, err := Listeners(svc, pool, p.ID, ip)
	if err != nil {
		return "", err
	}
	existing, err := owned(ctx, api, s.CloudspaceID, pool)
	if err != nil {
		return "", err
	}
	create, update, remove := PortDiff(existing, want)
	// Removals first: a port moved from one name to another frees its front end.
	for _, lb := range remove {
		if err := api.DeleteLoadBalancer(ctx, s.CloudspaceID, lb.ID); err != nil && !errors.Is(err, vco.ErrNotFound) {
			return "", fmt.Errorf("delete load balancer %s: %w", lb.Name, err)
		}
	}
	for _, u := range update {
		if err := api.UpdateLoadBalancer(ctx, s.CloudspaceID, u.ID, u.Spec); err != nil {
			return "", fmt.Errorf("update load balancer %s: %w", u.Spec.Name, err)
		}
	}
	for _, c := range create {
		if _, _, err := api.EnsureLoadBalancer(ctx, s.CloudspaceID, c); err != nil {
			return "", fmt.Errorf("create load balancer %s on %s:%d/%s: %w", c.Name, ip, c.FrontEnd.Port, c.Type, err)
		}
	}
	return ip, nil
}

// healthy is the members a site's pool should have: Ready candidates that answer the health
// port, or every Ready candidate when there is no port to probe.
func (b Balancer) healthy(ctx context.Context, svc *corev1.Service, cands []Candidate) []string {
	probe := ProbeSet(cands)
	port := HealthPort(svc, b.ClusterPolicyPort)
	if port == 0 || len(probe) == 0 {
		return probe
	}
	return health.Healthy(ctx, b.Prober, probe, port)
}

// SyncMembers re-decides the members of the Service's pools that exist, without touching its
// load balancers: the service controller calls the CCM only when the node set changes, not
// when a node's readiness or health does, so the CCM runs this on its own period.
func (b Balancer) SyncMembers(ctx context.Context, api API, sites []instances.Site, svc *corev1.Service, nodes []*corev1.Node) error {
	pool := PoolName(b.Namespace, b.Cluster, svc)
	var errs []error
	for _, s := range sites {
		pools, err := api.ListServerPools(ctx, s.CloudspaceID)
		if err != nil {
			errs = append(errs, fmt.Errorf("site %s: server pools: %w", s.Name, err))
			continue
		}
		i := slices.IndexFunc(pools, func(p vco.ServerPool) bool { return p.Name == pool })
		if i < 0 {
			continue
		}
		p, err := api.GetServerPool(ctx, s.CloudspaceID, pools[i].ID)
		if err != nil {
			errs = append(errs, fmt.Errorf("site %s: server pool %s: %w", s.Name, pool, err))
			continue
		}
		if _, err := loadbalancer.SyncMembers(ctx, api, s.CloudspaceID, p, b.healthy(ctx, svc, Candidates(nodes, s.Name))); err != nil {
			errs = append(errs, fmt.Errorf("site %s: %w", s.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Status reads what exists: the addresses of the sites that have the Service's load
// balancers, and whether anything of it (a load balancer or a pool) is left anywhere.
func (b Balancer) Status(ctx context.Context, api API, sites []instances.Site, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	pool := PoolName(b.Namespace, b.Cluster, svc)
	status := &corev1.LoadBalancerStatus{}
	exists := false
	for _, s := range sites {
		lbs, err := owned(ctx, api, s.CloudspaceID, pool)
		if err != nil {
			return nil, false, fmt.Errorf("site %s: %w", s.Name, err)
		}
		if len(lbs) > 0 {
			exists = true
			status.Ingress = append(status.Ingress, ingress(lbs[0].FrontEnd.IPAddress))
			continue
		}
		pools, err := api.ListServerPools(ctx, s.CloudspaceID)
		if err != nil {
			return nil, false, fmt.Errorf("site %s: server pools: %w", s.Name, err)
		}
		exists = exists || slices.ContainsFunc(pools, func(p vco.ServerPool) bool { return p.Name == pool })
	}
	return status, exists, nil
}

// Delete removes the Service's load balancers and pools from every site, permanently: the
// platform keeps no recycle bin for them.
func (b Balancer) Delete(ctx context.Context, api API, sites []instances.Site, svc *corev1.Service) error {
	pool := PoolName(b.Namespace, b.Cluster, svc)
	var errs []error
	for _, s := range sites {
		if err := b.deleteSite(ctx, api, s, pool); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (b Balancer) deleteSite(ctx context.Context, api API, s instances.Site, pool string) error {
	lbs, err := owned(ctx, api, s.CloudspaceID, pool)
	if err != nil {
		return fmt.Errorf("site %s: %w", s.Name, err)
	}
	for _, lb := range lbs {
		if err := api.DeleteLoadBalancer(ctx, s.CloudspaceID, lb.ID); err != nil && !errors.Is(err, vco.ErrNotFound) {
			return fmt.Errorf("site %s: delete load balancer %s: %w", s.Name, lb.Name, err)
		}
	}
	pools, err := api.ListServerPools(ctx, s.CloudspaceID)
	if err != nil {
		return fmt.Errorf("site %s: server pools: %w", s.Name, err)
	}
	for _, p := range pools {
		if p.Name != pool {
			continue
		}
		if err := api.DeleteServerPool(ctx, s.CloudspaceID, p.ID); err != nil && !errors.Is(err, vco.ErrNotFound) {
			return fmt.Errorf("site %s: delete server pool %s: %w", s.Name, pool, err)
		}
	}
	return nil
}

// owned reads the Service's load balancers in a cloudspace in full.
func owned(ctx context.Context, api API, cloudspaceID, pool string) ([]vco.LoadBalancer, error) {
	lbs, err := api.ListLoadBalancers(ctx, cloudspaceID)
	if err != nil {
		return nil, fmt.Errorf("load balancers: %w", err)
	}
	var out []vco.LoadBalancer
	for _, lb := range lbs {
		if !Owned(pool, lb.Name) {
			continue
		}
		full, err := api.GetLoadBalancer(ctx, cloudspaceID, lb.ID)
		if errors.Is(err, vco.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("load balancer %s: %w", lb.Name, err)
		}
		out = append(out, full)
	}
	return out, nil
}

// ingress is one published address. The mode is VIP, as the API server would default it:
// in-cluster clients of the address are served by kube-proxy directly.
func ingress(ip string) corev1.LoadBalancerIngress {
	vip := corev1.LoadBalancerIPModeVIP
	return corev1.LoadBalancerIngress{IP: ip, IPMode: &vip}
}
