package vcosim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// The record types below are the simulator's own model of the platform. They are exported so
// tests can read them through Snapshot; the wire shapes live next to the handlers, because
// the API's models differ per operation (list vs get) and must match the swagger exactly.

// Customer is a whitesky.cloud customer account.
type Customer struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Locations []string `json:"locations"`
}

// Location is a G8 site with its external networks and GPU profiles.
type Location struct {
	Name             string             `json:"name"`
	Datacenter       string             `json:"datacenter"`
	City             string             `json:"city"`
	Country          string             `json:"country"`
	CountryCode      string             `json:"country_code"`
	ExternalNetworks []*ExternalNetwork `json:"external_networks"`
	GPUProfiles      []*GPUProfile      `json:"gpu_profiles"`
}

// ExternalNetwork is a public (or provider) network in a location; it hands out IPs.
type ExternalNetwork struct {
	ID      int    `json:"id"`
	Name    string `json:"name"`
	Prefix  string `json:"prefix"` // first three octets, e.g. "203.0.113"
	Gateway string `json:"gateway"`
	Public  bool   `json:"public"`
	// Used maps an allocated IP to the cloudspace holding it.
	Used map[string]string `json:"used"`
}

// GPUProfile is a vGPU type a location offers.
type GPUProfile struct {
	ID          string `json:"id"`
	Vendor      string `json:"vendor"`
	Model       string `json:"model"`
	Description string `json:"description"`
	Instances   int    `json:"instances"`
}

// Image is a VM image; images are per location and do not travel.
type Image struct {
	ID           int     `json:"id"`
	Location     string  `json:"location"`
	Customer     string  `json:"customer"` // owner; "" for an operator image
	Name         string  `json:"name"`
	Description  string  `json:"description"`
	OSType       string  `json:"os_type"`
	OSName       string  `json:"os_name"`
	BootType     string  `json:"boot_type"`
	BootDiskSize int     `json:"boot_disk_size"`
	Memory       int     `json:"memory"`
	Public       bool    `json:"public"`
	Status       string  `json:"status"`
	URL          string  `json:"url"`
	DeletedAt    *int64  `json:"deleted_at,omitempty"`
	Tags         *string `json:"tags,omitempty"`
}

// PublicIP is one external-network address of a cloudspace.
type PublicIP struct {
	ExternalNetworkID int    `json:"external_network_id"`
	IP                string `json:"ip"`
	Metric            int    `json:"metric"`
}

// Cloudspace is an isolated network behind a virtual router.
type Cloudspace struct {
	ID             string     `json:"id"`
	Customer       string     `json:"customer"`
	Name           string     `json:"name"`
	Location       string     `json:"location"`
	Status         string     `json:"status"`
	PrivateNetwork string     `json:"private_network"`
	LocalDomain    string     `json:"local_domain"`
	Private        bool       `json:"private"`
	Parent         string     `json:"parent,omitempty"`
	PublicIPs      []PublicIP `json:"public_ips"` // the first is the primary external_network_ip
	Created        int64      `json:"created"`
	Updated        int64      `json:"updated"`
	DeletedAt      *int64     `json:"deleted_at,omitempty"`
	NextHost       int        `json:"next_host"`
	Quota          [4]int     `json:"quota"` // vcpu, memory, vdisk, public ip; -1 unlimited
}

// PrimaryIP is the cloudspace's external_network_ip ("" for a private cloudspace).
func (c *Cloudspace) PrimaryIP() string {
	if len(c.PublicIPs) == 0 {
		return ""
	}
	return c.PublicIPs[0].IP
}

// VM is a virtual machine.
type VM struct {
	ID           int      `json:"id"`
	Customer     string   `json:"customer"`
	CloudspaceID string   `json:"cloudspace_id"`
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Hostname     string   `json:"hostname"`
	Status       string   `json:"status"`
	UserData     string   `json:"user_data"`
	ImageID      int      `json:"image_id"`
	VCPUs        int      `json:"vcpus"`
	MemoryMiB    int      `json:"memory_mib"`
	BootDiskID   int      `json:"boot_disk_id"`
	BootType     string   `json:"boot_type"`
	PrivateIP    string   `json:"private_ip"`
	MAC          string   `json:"mac"`
	AgentEnabled bool     `json:"agent_enabled"`
	Created      float64  `json:"created"`
	Updated      float64  `json:"updated"`
	DeletedAt    *float64 `json:"deleted_at,omitempty"`
	// ExternalNICs are the NICs attached after create (nics.go).
	ExternalNICs []*ExternalNIC `json:"external_nics,omitempty"`
}

// Disk is a location-scoped virtual disk, optionally attached to a VM.
type Disk struct {
	ID          int    `json:"id"`
	Customer    string `json:"customer"`
	Location    string `json:"location"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Type        string `json:"type"` // BOOT, DATA
	SizeGiB     int    `json:"size_gib"`
	IOPS        int    `json:"iops"`
	VMID        int    `json:"vm_id"` // 0 when detached
	Order       int    `json:"order"`
	DeletedAt   *int64 `json:"deleted_at,omitempty"`
	// Snapshots are the disk's own, oldest first; a permanent delete takes them along.
	Snapshots []*DiskSnapshot `json:"snapshots,omitempty"`
}

// VGPU is a vGPU reservation. It is billed from reservation until it is released
// permanently, attached or not, and it has no owner field: only its name links it back.
type VGPU struct {
	ID         string `json:"id"`
	Customer   string `json:"customer"`
	Location   string `json:"location"`
	Name       string `json:"name"`
	GPUID      string `json:"gpu_id"`
	VMID       int    `json:"vm_id"` // 0 when unattached
	ReservedAt int64  `json:"reserved_at"`
	DeletedAt  *int64 `json:"deleted_at,omitempty"`
}

// PortForward maps a public port of a cloudspace IP to a VM port.
type PortForward struct {
	ID             string `json:"id"`
	CloudspaceID   string `json:"cloudspace_id"`
	Protocol       string `json:"protocol"`
	PublicIP       string `json:"public_ip"`
	PublicPort     int    `json:"public_port"`
	TillPublicPort int    `json:"till_public_port"`
	LocalPort      int    `json:"local_port"`
	LocalIP        string `json:"local_ip"`
	VMID           int    `json:"vm_id"`
}

// ServerPool is an ingress backend pool.
type ServerPool struct {
	ID           string     `json:"id"`
	CloudspaceID string     `json:"cloudspace_id"`
	Name         string     `json:"name"`
	Description  string     `json:"description"`
	Locked       bool       `json:"locked"`
	Hosts        []PoolHost `json:"hosts"`
}

// PoolHost is a member of a server pool: an address, without port or weight.
type PoolHost struct {
	ID      string `json:"id"`
	Address string `json:"address"`
}

// LoadBalancer is an L4 (TCP/UDP) load balancer; it has no health checks.
type LoadBalancer struct {
	ID           string `json:"id"`
	CloudspaceID string `json:"cloudspace_id"`
	Name         string `json:"name"`
	Description  string `json:"description"`
	Type         string `json:"type"`
	Locked       bool   `json:"locked"`
	FrontIP      string `json:"front_ip"`
	FrontPort    int    `json:"front_port"`
	TLS          *LBTLS `json:"tls,omitempty"`
	PoolID       string `json:"pool_id"`
	TargetPort   int    `json:"target_port"`
}

// LBTLS is the front-end TLS block of a load balancer.
type LBTLS struct {
	Enabled     bool   `json:"is_enabled"`
	Domain      string `json:"domain"`
	Termination bool   `json:"tls_termination"`
}

// DNSRecord is a record on a cloudspace, a VM NIC or the customer. TTL is always 3600:
// the platform sets it and the API cannot change it.
type DNSRecord struct {
	Customer     string `json:"customer"`
	CloudspaceID string `json:"cloudspace_id,omitempty"`
	Domain       string `json:"domain"`
	Type         string `json:"type"`
	Value        string `json:"value"`
	Priority     int    `json:"priority"`
	Weight       int    `json:"weight"`
	Port         int    `json:"port"`
	Service      string `json:"service"`
	Protocol     string `json:"protocol"`
	Tag          string `json:"tag"`
	Flag         string `json:"flag"`
	CAADomain    string `json:"caa_domain"`
	TTL          int    `json:"ttl"`
}

// Link is a connected-cloudspace (VPN) link. One POST creates it for both ends.
type Link struct {
	A       string `json:"a"` // cloudspace that asked for the link
	B       string `json:"b"`
	AIP     string `json:"a_ip"`
	BIP     string `json:"b_ip"`
	Created int64  `json:"created"`
}

// Certificate is an entry of the customer SSL certificate store.
type Certificate struct {
	ID        string  `json:"id"`
	Customer  string  `json:"customer"`
	Domain    string  `json:"domain"`
	Source    string  `json:"source"`
	CRT       string  `json:"crt"`
	Key       string  `json:"-"` // never leaves the store, not even in snapshots or the state file
	Issuer    string  `json:"issuer"`
	CreatedAt float64 `json:"created_at"`
	CreatedBy string  `json:"created_by"`
	ExpiresAt float64 `json:"expires_at"`
}

// AntiAffinityGroup spreads its VMs over nodes; the caller picks the id.
type AntiAffinityGroup struct {
	CloudspaceID string `json:"cloudspace_id"`
	ID           string `json:"id"`
	Spread       int    `json:"spread"`
	VMs          []int  `json:"vms"`
}

// Principal is an identity that can obtain tokens: a user or a service account.
type Principal struct {
	Name     string  `json:"name"`
	Customer string  `json:"customer"`
	ClientID string  `json:"client_id,omitempty"`
	Secret   string  `json:"-"` // kept only in the state file, never in snapshots
	Grants   []Grant `json:"grants"`
	// CustomerAdmin marks an admin of the customer: the only callers allowed to publish images
	// and to write the SSL certificate store.
	CustomerAdmin bool `json:"customer_admin"`
	// Operator marks a VCO operator, allowed on the operator (admin) endpoints.
	Operator bool `json:"operator"`
}

// Grant gives a principal permissions on a resource. ResourceType is one of customer,
// location, cloudspace, objectspace, vm, disk; a vm id is "<cloudspace_id>:<vm_id>".
type Grant struct {
	ResourceType string   `json:"resource_type"`
	ResourceID   string   `json:"resource_id"`
	Permissions  []string `json:"permissions"` // create, read, update, delete, execute; empty = all
}

// Permissions of the platform's role model.
const (
	PermCreate  = "create"
	PermRead    = "read"
	PermUpdate  = "update"
	PermDelete  = "delete"
	PermExecute = "execute"
)

// state is everything the simulator knows. One mutex (in Sim) guards it; it is small enough
// that per-resource locking would only add ways to get it wrong.
type state struct {
	Customers     map[string]*Customer          `json:"customers"`
	Locations     map[string]*Location          `json:"locations"`
	Principals    map[string]*Principal         `json:"principals"`
	Images        map[int]*Image                `json:"images"`
	Cloudspaces   map[string]*Cloudspace        `json:"cloudspaces"`
	VMs           map[int]*VM                   `json:"vms"`
	Disks         map[int]*Disk                 `json:"disks"`
	VGPUs         map[string]*VGPU              `json:"vgpus"`
	VGPUOrder     []string                      `json:"vgpu_order"` // reservation order: pagination is by offset
	PortForwards  map[string]*PortForward       `json:"port_forwards"`
	ServerPools   map[string]*ServerPool        `json:"server_pools"`
	LoadBalancers map[string]*LoadBalancer      `json:"load_balancers"`
	DNSRecords    []*DNSRecord                  `json:"dns_records"`
	Links         []*Link                       `json:"links"`
	Certificates  map[string]*Certificate       `json:"certificates"`  // key customer/source/domain
	AntiAffinity  map[string]*AntiAffinityGroup `json:"anti_affinity"` // key cloudspace/group
	NextInt       int                           `json:"next_int"`
	NextString    int                           `json:"next_string"`
}

func newState() *state {
	return &state{
		Customers: map[string]*Customer{}, Locations: map[string]*Location{}, Principals: map[string]*Principal{},
		Images: map[int]*Image{}, Cloudspaces: map[string]*Cloudspace{}, VMs: map[int]*VM{}, Disks: map[int]*Disk{},
		VGPUs: map[string]*VGPU{}, PortForwards: map[string]*PortForward{}, ServerPools: map[string]*ServerPool{},
		LoadBalancers: map[string]*LoadBalancer{}, Certificates: map[string]*Certificate{},
		AntiAffinity: map[string]*AntiAffinityGroup{}, NextInt: 100, NextString: 1,
	}
}

// intID hands out the integer ids (VMs, disks, images); one counter keeps them unique across
// kinds, which makes mix-ups visible in tests.
func (s *state) intID() int {
	s.NextInt++
	return s.NextInt
}

// stringID hands out opaque string ids with a readable prefix.
func (s *state) stringID(prefix string) string {
	s.NextString++
	return fmt.Sprintf("%s-%06d", prefix, s.NextString)
}

// vgpusIn returns the reservations of a customer in a location in reservation order.
func (s *state) vgpusIn(customer, location string) []*VGPU {
	var out []*VGPU
	for _, id := range s.VGPUOrder {
		if v := s.VGPUs[id]; v != nil && v.Customer == customer && v.Location == location {
			out = append(out, v)
		}
	}
	return out
}

func (s *state) vmsIn(cloudspaceID string) []*VM {
	var out []*VM
	for _, vm := range s.VMs {
		if vm.CloudspaceID == cloudspaceID {
			out = append(out, vm)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// persisted is the state file: the state plus the token signing key, so that tokens printed
// before a restart stay valid after it.
type persisted struct {
	Version    int               `json:"version"`
	SigningKey []byte            `json:"signing_key"`
	Secrets    map[string]string `json:"secrets"` // principal -> client secret
	Keys       map[string]string `json:"keys"`    // certificate id -> private key
	State      *state            `json:"state"`
}

const stateVersion = 1

func loadState(path string) (*persisted, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading state file: %w", err)
	}
	var p persisted
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("state file %s is not valid JSON (move it away to start fresh): %w", path, err)
	}
	if p.Version != stateVersion || p.State == nil {
		return nil, fmt.Errorf("state file %s has version %d, this simulator reads %d (move it away to start fresh)", path, p.Version, stateVersion)
	}
	for name, sec := range p.Secrets {
		if pr := p.State.Principals[name]; pr != nil {
			pr.Secret = sec
		}
	}
	for id, key := range p.Keys {
		for _, c := range p.State.Certificates {
			if c.ID == id {
				c.Key = key
			}
		}
	}
	return &p, nil
}

// saveState writes atomically (temp file + rename) so a crash never leaves half a file.
func saveState(path string, key []byte, st *state) error {
	p := persisted{Version: stateVersion, SigningKey: key, State: st, Secrets: map[string]string{}, Keys: map[string]string{}}
	for name, pr := range st.Principals {
		if pr.Secret != "" {
			p.Secrets[name] = pr.Secret
		}
	}
	for _, c := range st.Certificates {
		p.Keys[c.ID] = c.Key
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".vcosim-state-*")
	if err != nil {
		return fmt.Errorf("writing state file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("writing state file: %w", err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
