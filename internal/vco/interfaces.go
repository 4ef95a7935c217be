package vco

import "context"

// One interface per API area. Callers should take the narrowest one, or declare their own
// subset (e.g. capvco-gpucheck needs ListAllVGPUs and ReleaseVGPU only); *Client has them all.

// Account checks credentials and locations.
type Account interface {
	Me(ctx context.Context) (User, error)
	ListLocations(ctx context.Context) ([]Location, error)
	CheckLocation(ctx context.Context, location string) error
}

// Cloudspaces manages cloudspaces.
type Cloudspaces interface {
	CreateCloudspace(ctx context.Context, req CreateCloudspaceRequest) (string, error)
	EnsureCloudspace(ctx context.Context, req CreateCloudspaceRequest) (Cloudspace, bool, error)
	FindCloudspace(ctx context.Context, location, name string) (Cloudspace, error)
	GetCloudspace(ctx context.Context, id string) (Cloudspace, error)
	ListCloudspaces(ctx context.Context, opts ListCloudspacesOptions) ([]Cloudspace, error)
	DeleteCloudspace(ctx context.Context, id string, permanently bool) error
}

// VMs manages virtual machines.
type VMs interface {
	CreateVM(ctx context.Context, cloudspaceID string, req CreateVMRequest) (int, error)
	EnsureVM(ctx context.Context, cloudspaceID string, req CreateVMRequest) (VM, bool, error)
	EnsureVMListed(ctx context.Context, cloudspaceID string, req CreateVMRequest, list func(context.Context) ([]VM, error)) (VM, bool, error)
	FindVM(ctx context.Context, cloudspaceID, name string) (VM, error)
	GetVM(ctx context.Context, cloudspaceID string, id int) (VM, error)
	ListVMs(ctx context.Context, cloudspaceID string, includeDeleted bool) ([]VM, error)
	StartVM(ctx context.Context, cloudspaceID string, id int) error
	StopVM(ctx context.Context, cloudspaceID string, id int, force bool) error
	DeleteVM(ctx context.Context, cloudspaceID string, id int, opts DeleteVMOptions) error
}

// Images reads (and, with an admin credential, publishes) location-scoped images.
type Images interface {
	ListImages(ctx context.Context, location string) ([]Image, error)
	GetImage(ctx context.Context, location string, id int) (Image, error)
	FindImage(ctx context.Context, location, name string) (Image, error)
	CreateImage(ctx context.Context, location string, req CreateImageRequest) (int, error)
	DeleteImage(ctx context.Context, location string, id int, permanently bool) error
	PublishImage(ctx context.Context, location string, id int) error
}

// Disks manages location-scoped disks and their attachment to VMs.
type Disks interface {
	CreateDisk(ctx context.Context, location string, req CreateDiskRequest) (int, error)
	GetDisk(ctx context.Context, location string, id int) (Disk, error)
	ListDisks(ctx context.Context, location string) ([]Disk, error)
	DeleteDisk(ctx context.Context, location string, id int, permanently bool) error
	ListVMDisks(ctx context.Context, cloudspaceID string, vmID int) ([]VMDisk, error)
	AttachDisk(ctx context.Context, cloudspaceID string, vmID, diskID int) error
	DetachDisk(ctx context.Context, cloudspaceID string, vmID, diskID int) error
}

// Networks reads external networks and manages a cloudspace's public IPs.
type Networks interface {
	ListExternalNetworks(ctx context.Context, location string) ([]ExternalNetwork, error)
	GetExternalNetwork(ctx context.Context, location string, id int) (ExternalNetwork, error)
	ListPublicIPs(ctx context.Context, cloudspaceID string) ([]PublicIP, error)
	AddPublicIP(ctx context.Context, cloudspaceID string, networkID int, ip string) (PublicIP, error)
	RemovePublicIP(ctx context.Context, cloudspaceID string, networkID int, ip string) error
}

// PortForwards manages port forwards.
type PortForwards interface {
	CreatePortForward(ctx context.Context, cloudspaceID string, req CreatePortForwardRequest) (string, error)
	ListPortForwards(ctx context.Context, cloudspaceID string) ([]PortForward, error)
	GetPortForward(ctx context.Context, cloudspaceID, id string) (PortForward, error)
	DeletePortForward(ctx context.Context, cloudspaceID, id string) error
}

// ServerPools manages the member lists behind load balancers.
type ServerPools interface {
	ListServerPools(ctx context.Context, cloudspaceID string) ([]ServerPool, error)
	CreateServerPool(ctx context.Context, cloudspaceID, name, description string) (string, error)
	EnsureServerPool(ctx context.Context, cloudspaceID, name, description string) (ServerPool, bool, error)
	GetServerPool(ctx context.Context, cloudspaceID, id string) (ServerPool, error)
	DeleteServerPool(ctx context.Context, cloudspaceID, id string) error
	ListPoolHosts(ctx context.Context, cloudspaceID, poolID string) ([]PoolHost, error)
	AddPoolHost(ctx context.Context, cloudspaceID, poolID, address string) (PoolHost, error)
	RemovePoolHost(ctx context.Context, cloudspaceID, poolID, hostID string) error
}

// LoadBalancers manages L4 load balancers.
type LoadBalancers interface {
	ListLoadBalancers(ctx context.Context, cloudspaceID string) ([]LoadBalancer, error)
	CreateLoadBalancer(ctx context.Context, cloudspaceID string, spec LoadBalancerSpec) (string, error)
	EnsureLoadBalancer(ctx context.Context, cloudspaceID string, spec LoadBalancerSpec) (LoadBalancer, bool, error)
	GetLoadBalancer(ctx context.Context, cloudspaceID, id string) (LoadBalancer, error)
	UpdateLoadBalancer(ctx context.Context, cloudspaceID, id string, spec LoadBalancerSpec) error
	DeleteLoadBalancer(ctx context.Context, cloudspaceID, id string) error
}

// DNS manages DNS records (slow writes, fixed TTL).
type DNS interface {
	ListCloudspaceDNSRecords(ctx context.Context, cloudspaceID string) ([]DNSRecord, error)
	CreateCloudspaceDNSRecord(ctx context.Context, cloudspaceID string, spec DNSRecordSpec) error
	EnsureCloudspaceDNSRecord(ctx context.Context, cloudspaceID string, spec DNSRecordSpec) (bool, error)
	DeleteCloudspaceDNSRecord(ctx context.Context, cloudspaceID, domain, recordType string) error
	ListCustomerDNSRecords(ctx context.Context) ([]DNSRecord, error)
	CreateCustomerDNSRecord(ctx context.Context, spec DNSRecordSpec) error
	DeleteCustomerDNSRecord(ctx context.Context, domain, recordType, value string) error
}

// VGPUs manages GPU profiles and vGPU reservations.
type VGPUs interface {
	ListGPUProfiles(ctx context.Context, location string) ([]GPUProfile, error)
	ReserveVGPU(ctx context.Context, location, profileID, name string) (string, error)
	ReserveAndAttachVGPU(ctx context.Context, cloudspaceID string, vmID int, profileID, name string) (string, error)
	EnsureAttachedVGPU(ctx context.Context, location, cloudspaceID string, vmID int, profileID, name string) (VGPU, bool, error)
	ListVGPUs(ctx context.Context, location string, opts ListVGPUsOptions) (VGPUPage, error)
	ListAllVGPUs(ctx context.Context, location string, opts ListVGPUsOptions) ([]VGPU, error)
	FindVGPUs(ctx context.Context, location, name string) ([]VGPU, error)
	AttachVGPU(ctx context.Context, cloudspaceID string, vmID int, vgpuID string) error
	DetachVGPU(ctx context.Context, cloudspaceID string, vmID int, vgpuID string) error
	ReleaseVGPU(ctx context.Context, location, vgpuID string) error
}

// ConnectedCloudspaces manages geo links between cloudspaces.
type ConnectedCloudspaces interface {
	ListConnectedCloudspaces(ctx context.Context, cloudspaceID string) ([]ConnectedCloudspace, error)
	ConnectCloudspaces(ctx context.Context, cloudspaceID, otherID, localIP, remoteIP string) error
	ConnectionStatus(ctx context.Context, cloudspaceID, otherID string) (string, error)
	DisconnectCloudspaces(ctx context.Context, cloudspaceID, otherID, localIP, remoteIP string) error
}

// Certificates manages the customer SSL certificate store (admin credential for writes).
type Certificates interface {
	ListCertificates(ctx context.Context) ([]Certificate, error)
	UploadCertificate(ctx context.Context, certPEM, keyPEM string) (Certificate, error)
	GetCertificate(ctx context.Context, domain string) (Certificate, error)
	ReplaceCertificate(ctx context.Context, domain, certPEM, keyPEM string) (Certificate, error)
	DeleteCertificate(ctx context.Context, domain string) error
}

// AntiAffinityGroups manages anti-affinity groups.
type AntiAffinityGroups interface {
	ListAntiAffinityGroups(ctx context.Context, cloudspaceID string) ([]AntiAffinityGroup, error)
	CreateAntiAffinityGroup(ctx context.Context, cloudspaceID, id string, spread int) error
	GetAntiAffinityGroup(ctx context.Context, cloudspaceID, id string) (AntiAffinityGroup, error)
	UpdateAntiAffinityGroup(ctx context.Context, cloudspaceID, id string, spread int) error
	DeleteAntiAffinityGroup(ctx context.Context, cloudspaceID, id string) error
	ListAntiAffinityGroupVMs(ctx context.Context, cloudspaceID, id string) ([]GroupVM, error)
	AddAntiAffinityGroupVM(ctx context.Context, cloudspaceID, id string, vmID int) error
	RemoveAntiAffinityGroupVM(ctx context.Context, cloudspaceID, id string, vmID int) error
}

var (
	_ Account              = (*Client)(nil)
	_ Cloudspaces          = (*Client)(nil)
	_ VMs                  = (*Client)(nil)
	_ Images               = (*Client)(nil)
	_ Disks                = (*Client)(nil)
	_ Networks             = (*Client)(nil)
	_ PortForwards         = (*Client)(nil)
	_ ServerPools          = (*Client)(nil)
	_ LoadBalancers        = (*Client)(nil)
	_ DNS                  = (*Client)(nil)
	_ VGPUs                = (*Client)(nil)
	_ ConnectedCloudspaces = (*Client)(nil)
	_ Certificates         = (*Client)(nil)
	_ AntiAffinityGroups   = (*Client)(nil)
)
