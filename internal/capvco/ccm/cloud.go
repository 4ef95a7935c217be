// Package ccm is capvco-cloud-controller-manager: the k8s.io/cloud-provider implementation for
// CAPVCO clusters on whitesky.cloud. It initialises Nodes (provider ID, addresses, instance type,
// region and zone), reports Nodes whose VM is gone or halted to the node lifecycle controller,
// and keeps the platform load balancers of Services of type LoadBalancer, with members chosen by
// health because the platform load balancer has no health checks.
package ccm

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/capx-io/capx/internal/capvco/ccm/config"
	"github.com/capx-io/capx/internal/capvco/ccm/instances"
	"github.com/capx-io/capx/internal/capvco/ccm/servicelb"
	"github.com/capx-io/capx/internal/capvco/health"
	"github.com/capx-io/capx/internal/vco"
)

// ProviderName is the cloud provider's name: the scheme of the provider IDs CAPVCO sets.
const ProviderName = "vco"

// Platform is the part of the whitesky.cloud API the CCM uses.
type Platform interface {
	instances.API
	servicelb.API
	FindCloudspace(ctx context.Context, location, name string) (vco.Cloudspace, error)
}

// PlatformFunc returns the client for the current credential. It is called for every
// operation, so a rotated credential Secret is picked up without a restart.
type PlatformFunc func() (Platform, error)

// FromCredentials is the production PlatformFunc: the credential files of cfg, one shared
// client per credential.
func FromCredentials(cfg config.Config, f *vco.Factory) PlatformFunc {
	return func() (Platform, error) {
		creds, err := cfg.Credentials()
		if err != nil {
			return nil, err
		}
		return f.Client(creds)
	}
}

// Cloud implements cloudprovider.Interface, InstancesV2 and LoadBalancer.
type Cloud struct {
	cfg      config.Config
	platform PlatformFunc
	balancer servicelb.Balancer

	// resolved holds the cloudspace id found for each site's name. A cloudspace keeps its id
	// for its whole life, so remembering it changes no answer; a site whose cloudspace was
	// replaced fails its reads instead, and a restart looks the name up again.
	mu       sync.Mutex
	resolved map[string]string

	locks sync.Map // Service namespace/name -> *sync.Mutex
}

// New builds the cloud for a checked config.
func New(cfg config.Config, platform PlatformFunc, prober health.Prober) *Cloud {
	return &Cloud{
		cfg: cfg, platform: platform, resolved: map[string]string{},
		balancer: servicelb.Balancer{Namespace: cfg.Cluster.Namespace, Cluster: cfg.Cluster.Name, Prober: prober,
			ClusterPolicyPort: cfg.LoadBalancer.ClusterPolicyPort()},
	}
}

var (
	_ cloudprovider.Interface    = (*Cloud)(nil)
	_ cloudprovider.InstancesV2  = (*Cloud)(nil)
	_ cloudprovider.LoadBalancer = (*Cloud)(nil)
)

// Initialize implements cloudprovider.Interface; the CCM needs no client of its own.
func (c *Cloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}

// LoadBalancer implements cloudprovider.Interface.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

// Instances implements cloudprovider.Interface: InstancesV2 replaces it.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 implements cloudprovider.Interface.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }

// Zones implements cloudprovider.Interface: InstancesV2 gives zones.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters implements cloudprovider.Interface.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes implements cloudprovider.Interface: the CNI routes pods; cloudspaces route nothing.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) { return nil, false }

// ProviderName implements cloudprovider.Interface.
func (c *Cloud) ProviderName() string { return ProviderName }

// HasClusterID implements cloudprovider.Interface: the cloud-config names the cluster.
func (c *Cloud) HasClusterID() bool { return true }

// sites resolves every configured site to its cloudspace and returns a client.
func (c *Cloud) sites(ctx context.Context) (Platform, []instances.Site, error) {
	api, err := c.platform()
	if err != nil {
		return nil, nil, err
	}
	out := make([]instances.Site, 0, len(c.cfg.Sites))
	for _, s := range c.cfg.Sites {
		id, err := c.cloudspaceID(ctx, api, s)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, instances.Site{Name: s.Name, Location: s.Location, CloudspaceID: id})
	}
	return api, out, nil
}

func (c *Cloud) cloudspaceID(ctx context.Context, api Platform, s config.Site) (string, error) {
	if s.CloudspaceID != "" {
		return s.CloudspaceID, nil
	}
	c.mu.Lock()
	id := c.resolved[s.Name]
	c.mu.Unlock()
	if id != "" {
		return id, nil
	}
	name := c.cfg.CloudspaceName(s)
	cs, err := api.FindCloudspace(ctx, s.Location, name)
	if err != nil {
		return "", fmt.Errorf("site %s: cloudspace %s in %s: %w", s.Name, name, s.Location, err)
	}
	c.mu.Lock()
	c.resolved[s.Name] = cs.ID
	c.mu.Unlock()
	return cs.ID, nil
}

// InstanceExists implements InstancesV2. Only a VM every site's cloudspace answered for as
// absent is reported gone: the node lifecycle controller deletes the Node then.
func (c *Cloud) InstanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	api, sites, err := c.sites(ctx)
	if err != nil {
		return false, err
	}
	_, err = instances.Locate(ctx, api, sites, node)
	if errors.Is(err, cloudprovider.InstanceNotFound) {
		return false, nil
	}
	return err == nil, err
}

// InstanceShutdown implements InstancesV2: a halted VM.
func (c *Cloud) InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error) {
	api, sites, err := c.sites(ctx)
	if err != nil {
		return false, err
	}
	f, err := instances.Locate(ctx, api, sites, node)
	if err != nil {
		return false, err
	}
	return instances.Shutdown(f.VM), nil
}

// InstanceMetadata implements InstancesV2.
func (c *Cloud) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	api, sites, err := c.sites(ctx)
	if err != nil {
		return nil, err
	}
	f, err := instances.Locate(ctx, api, sites, node)
	if err != nil {
		return nil, err
	}
	return instances.Metadata(f), nil
}
