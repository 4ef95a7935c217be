package vco

import (
	"context"
	"encoding/json"
)

// The platform's L4 load balancer has no health checks, failover or weights: a server pool is
// a list of addresses, and callers (CAPVCO) manage membership by health themselves.

const (
	pathServerPools   = pathCloudspace + "/ingress/server-pools"
	pathServerPool    = pathServerPools + "/{serverpool_id}"
	pathLoadBalancers = pathCloudspace + "/ingress/load-balancers"
	pathLoadBalancer  = pathLoadBalancers + "/{loadbalancer_id}"
)

var (
	opListServerPools    = get("ListServerPools", pathServerPools)
	opCreateServerPool   = post("CreateServerPool", pathServerPools)
	opGetServerPool      = get("GetServerPool", pathServerPool)
	opDeleteServerPool   = del("DeleteServerPool", pathServerPool)
	opListPoolHosts      = get("ListPoolHosts", pathServerPool+"/hosts")
	opAddPoolHost        = post("AddPoolHost", pathServerPool+"/hosts")
	opRemovePoolHost     = del("RemovePoolHost", pathServerPool+"/hosts/{host_id}")
	opListLoadBalancers  = get("ListLoadBalancers", pathLoadBalancers)
	opCreateLoadBalancer = post("CreateLoadBalancer", pathLoadBalancers)
	opGetLoadBalancer    = get("GetLoadBalancer", pathLoadBalancer)
	opUpdateLoadBalancer = put("UpdateLoadBalancer", pathLoadBalancer)
	opDeleteLoadBalancer = del("DeleteLoadBalancer", pathLoadBalancer)
)

// ServerPool is a set of backend addresses.
type ServerPool struct {
	ID          string     `json:"serverpool_id"`
	Name        string     `json:"name"`
	Description string     `json:"description"`
	Locked      bool       `json:"locked"`
	Hosts       []PoolHost `json:"hosts"` // set by GetServerPool
}

// PoolHost is a pool member: an address only, no port and no weight.
type PoolHost struct {
	ID      string `json:"host_id"`
	Address string `json:"address"`
}

// ListServerPools lists a cloudspace's pools (without hosts).
func (c *Client) ListServerPools(ctx context.Context, cloudspaceID string) ([]ServerPool, error) {
	var out resultList[ServerPool]
	err := c.do(ctx, opListServerPools, call{path: args(cloudspaceID)}, &out)
	return out.Result, err
}

// CreateServerPool creates an empty pool.
func (c *Client) CreateServerPool(ctx context.Context, cloudspaceID, name, description string) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	q := query{}.str("name", name).str("description", description)
	if err := c.do(ctx, opCreateServerPool, call{path: args(cloudspaceID), query: q.values()}, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// GetServerPool reads a pool with its hosts.
func (c *Client) GetServerPool(ctx context.Context, cloudspaceID, id string) (ServerPool, error) {
	var out ServerPool
	err := c.do(ctx, opGetServerPool, call{path: args(cloudspaceID, id)}, &out)
	return out, err
}

// DeleteServerPool deletes a pool; ErrConflict while a load balancer uses it.
func (c *Client) DeleteServerPool(ctx context.Context, cloudspaceID, id string) error {
	return c.do(ctx, opDeleteServerPool, call{path: args(cloudspaceID, id)}, nil)
}

// ListPoolHosts lists a pool's members.
func (c *Client) ListPoolHosts(ctx context.Context, cloudspaceID, poolID string) ([]PoolHost, error) {
	var out resultList[PoolHost]
	err := c.do(ctx, opListPoolHosts, call{path: args(cloudspaceID, poolID)}, &out)
	return out.Result, err
}

// AddPoolHost adds an address (IP or DNS name, no port) to a pool.
func (c *Client) AddPoolHost(ctx context.Context, cloudspaceID, poolID, address string) (PoolHost, error) {
	var out PoolHost
	err := c.do(ctx, opAddPoolHost, call{path: args(cloudspaceID, poolID), query: query{}.str("address", address).values()}, &out)
	return out, err
}

// RemovePoolHost removes a member by its host id.
func (c *Client) RemovePoolHost(ctx context.Context, cloudspaceID, poolID, hostID string) error {
	return c.do(ctx, opRemovePoolHost, call{path: args(cloudspaceID, poolID, hostID)}, nil)
}

// LoadBalancer is an L4 (TCP/UDP) load balancer: one front-end port to one pool and port.
type LoadBalancer struct {
	ID          string     `json:"loadbalancer_id"`
	Name        string     `json:"name"`
	Description string     `json:"description"`
	Type        string     `json:"type"`
	Locked      bool       `json:"locked"`
	FrontEnd    LBFrontEnd `json:"front_end"` // set by GetLoadBalancer
	BackEnd     LBBackEnd  `json:"back_end"`  // set by GetLoadBalancer
	// ServerPoolName is set by ListLoadBalancers.
	ServerPoolName string `json:"serverpool_name"`
}

// LBFrontEnd is where a load balancer listens; IPAddress "" means every cloudspace IP.
type LBFrontEnd struct {
	Port      int    `json:"port"`
	IPAddress string `json:"ip_address,omitempty"`
	TLS       *LBTLS `json:"tls,omitempty"`
}

// LBTLS is the optional TLS block of a front end.
type LBTLS struct {
	Enabled     bool   `json:"is_enabled"`
	Domain      string `json:"domain,omitempty"`
	Termination bool   `json:"tls_termination"`
}

// LBBackEnd is the pool and port traffic goes to.
type LBBackEnd struct {
	ServerPoolID string `json:"serverpool_id"`
	TargetPort   int    `json:"target_port"`
}

// UnmarshalJSON tolerates a null ip_address.
func (f *LBFrontEnd) UnmarshalJSON(b []byte) error {
	type plain LBFrontEnd
	var w struct {
		plain
		IP flexString `json:"ip_address"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*f = LBFrontEnd(w.plain)
	f.IPAddress = string(w.IP)
	return nil
}

// LoadBalancerSpec is the create/update body (updates send the full spec again).
type LoadBalancerSpec struct {
	Name        string     `json:"name"`
	Description string     `json:"description,omitempty"`
	Type        string     `json:"type"` // TCP or UDP
	Locked      bool       `json:"locked"`
	FrontEnd    LBFrontEnd `json:"front_end"`
	BackEnd     LBBackEnd  `json:"back_end"`
}

// ListLoadBalancers lists a cloudspace's load balancers (summaries).
func (c *Client) ListLoadBalancers(ctx context.Context, cloudspaceID string) ([]LoadBalancer, error) {
	var out resultList[LoadBalancer]
	err := c.do(ctx, opListLoadBalancers, call{path: args(cloudspaceID)}, &out)
	return out.Result, err
}

// CreateLoadBalancer creates a load balancer; ErrConflict when the front-end port is taken.
func (c *Client) CreateLoadBalancer(ctx context.Context, cloudspaceID string, spec LoadBalancerSpec) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	if err := c.do(ctx, opCreateLoadBalancer, call{path: args(cloudspaceID), body: spec}, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// GetLoadBalancer reads a load balancer in full.
func (c *Client) GetLoadBalancer(ctx context.Context, cloudspaceID, id string) (LoadBalancer, error) {
	var out LoadBalancer
	err := c.do(ctx, opGetLoadBalancer, call{path: args(cloudspaceID, id)}, &out)
	return out, err
}

// UpdateLoadBalancer replaces a load balancer's spec.
func (c *Client) UpdateLoadBalancer(ctx context.Context, cloudspaceID, id string, spec LoadBalancerSpec) error {
	return c.do(ctx, opUpdateLoadBalancer, call{path: args(cloudspaceID, id), body: spec}, nil)
}

// DeleteLoadBalancer deletes a load balancer.
func (c *Client) DeleteLoadBalancer(ctx context.Context, cloudspaceID, id string) error {
	return c.do(ctx, opDeleteLoadBalancer, call{path: args(cloudspaceID, id)}, nil)
}
