package ccm

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/cloud-provider/api"

	"github.com/capx-io/capx/internal/capvco/ccm/servicelb"
)

// Retry delays handed to the service controller.
const (
	// noNodesRetry: nodes are initialised within seconds of joining.
	noNodesRetry = 15 * time.Second
	// publishRetry: Ensure runs again at once to publish addresses Update cannot.
	publishRetry = time.Second
)

// GetLoadBalancer implements cloudprovider.LoadBalancer.
func (c *Cloud) GetLoadBalancer(ctx context.Context, _ string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	p, sites, err := c.sites(ctx)
	if err != nil {
		return nil, false, err
	}
	return c.balancer.Status(ctx, p, sites, svc)
}

// GetLoadBalancerName implements cloudprovider.LoadBalancer: the name of the Service's server
// pools, which its load balancers' names extend.
func (c *Cloud) GetLoadBalancerName(_ context.Context, _ string, svc *corev1.Service) string {
	return servicelb.PoolName(c.cfg.Cluster.Namespace, c.cfg.Cluster.Name, svc)
}

// EnsureLoadBalancer implements cloudprovider.LoadBalancer.
func (c *Cloud) EnsureLoadBalancer(ctx context.Context, _ string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	defer c.lock(svc)()
	p, sites, err := c.sites(ctx)
	if err != nil {
		return nil, err
	}
	st, err := c.balancer.Ensure(ctx, p, sites, svc, nodes)
	if errors.Is(err, servicelb.ErrNoNodes) {
		return nil, api.NewRetryError(err.Error(), noNodesRetry)
	}
	return st, err
}

// UpdateLoadBalancer implements cloudprovider.LoadBalancer: the node set changed. When that
// changes the sites the Service is published in (a site got its first node, or lost its
// last), Update cannot write the Service's status, so it asks the service controller to run
// Ensure, which does.
func (c *Cloud) UpdateLoadBalancer(ctx context.Context, _ string, svc *corev1.Service, nodes []*corev1.Node) error {
	defer c.lock(svc)()
	p, sites, err := c.sites(ctx)
	if err != nil {
		return err
	}
	st, err := c.balancer.Ensure(ctx, p, sites, svc, nodes)
	if errors.Is(err, servicelb.ErrNoNodes) {
		st, err = &corev1.LoadBalancerStatus{}, nil
	}
	if err != nil {
		return err
	}
	if !sameAddresses(svc.Status.LoadBalancer, *st) {
		return api.NewRetryError("the Service's load balancer addresses changed with its nodes; publishing them", publishRetry)
	}
	return nil
}

// EnsureLoadBalancerDeleted implements cloudprovider.LoadBalancer.
func (c *Cloud) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *corev1.Service) error {
	defer c.lock(svc)()
	p, sites, err := c.sites(ctx)
	if err != nil {
		return err
	}
	return c.balancer.Delete(ctx, p, sites, svc)
}

// SyncMembers re-decides the members of every load-balanced Service's pools.
func (c *Cloud) SyncMembers(ctx context.Context, services []*corev1.Service, nodes []*corev1.Node) error {
	var wanted []*corev1.Service
	for _, svc := range services {
		if WantsLoadBalancer(svc) {
			wanted = append(wanted, svc)
		}
	}
	if len(wanted) == 0 {
		return nil
	}
	p, sites, err := c.sites(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, svc := range wanted {
		unlock := c.lock(svc)
		errs = append(errs, c.balancer.SyncMembers(ctx, p, sites, svc, nodes))
		unlock()
	}
	return errors.Join(errs...)
}

// WantsLoadBalancer is the service controller's own test: type LoadBalancer without a
// loadBalancerClass (another implementation's), not being deleted.
func WantsLoadBalancer(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil && svc.DeletionTimestamp.IsZero()
}

// lock serialises the calls for one Service: the service controller's service and node
// workers, and the members controller, may otherwise act on the same pool at once.
func (c *Cloud) lock(svc *corev1.Service) func() {
	m, _ := c.locks.LoadOrStore(svc.Namespace+"/"+svc.Name, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// sameAddresses compares the published IPs only: the API server fills in fields (ipMode)
// the CCM leaves to it.
func sameAddresses(a, b corev1.LoadBalancerStatus) bool {
	ips := func(s corev1.LoadBalancerStatus) []string {
		var out []string
		for _, i := range s.Ingress {
			out = append(out, i.IP)
		}
		return out
	}
	return slices.Equal(ips(a), ips(b))
}
