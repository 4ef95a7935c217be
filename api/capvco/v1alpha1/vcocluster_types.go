package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// VCOClusterFinalizer keeps a VCOCluster until its cloudspaces and reservations are gone.
const VCOClusterFinalizer = "vcocluster.infrastructure.cluster.x-k8s.io"

// VCOClusterSpec is the desired whitesky.cloud infrastructure of a workload cluster.
// +kubebuilder:validation:XValidation:rule="self.location == oldSelf.location",message="location is immutable: the cluster's cloudspace lives there"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.controlPlaneEndpoint) || !has(oldSelf.controlPlaneEndpoint.host) || (has(self.controlPlaneEndpoint) && self.controlPlaneEndpoint == oldSelf.controlPlaneEndpoint)",message="controlPlaneEndpoint cannot change once set: machines and kubeconfigs already point at it"
type VCOClusterSpec struct {
	// controlPlaneEndpoint is where the workload cluster's API server is reached. Leave it empty
	// and the controller sets it to the control-plane load balancer (or the DNS name).
	// +optional
	// +kubebuilder:validation:XValidation:rule="has(self.host) == has(self.port)",message="set host and port together"
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// credentialsRef names the Secret, in the VCOCluster's namespace, with the whitesky.cloud
	// credential: keys url (API base, e.g. https://try.whitesky.cloud/api/1), customer, and
	// either jwt or clientID and clientSecret. Scope it to what the cluster needs.
	// +required
	CredentialsRef corev1.LocalObjectReference `json:"credentialsRef"`

	// location is the whitesky.cloud location of the primary site, e.g. nl-rmd-dc01-001.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Location string `json:"location"`

	// cloudspace shapes the cloudspace of every site.
	// +optional
	Cloudspace CloudspaceSpec `json:"cloudspace,omitempty,omitzero"`

	// controlPlaneLoadBalancer puts the API servers behind the platform's L4 load balancer.
	// +optional
	ControlPlaneLoadBalancer LoadBalancerSpec `json:"controlPlaneLoadBalancer,omitempty,omitzero"`

	// dns publishes the control-plane endpoint under a DNS name. The platform fixes the TTL at
	// 3600 s, so failing over to another site's address can take up to an hour for clients.
	// +optional
	DNS *DNSSpec `json:"dns,omitempty"`

	// geo spreads the cluster over sites in one or more locations, one cloudspace per site,
	// meshed with connected cloudspaces.
	// +optional
	Geo *GeoSpec `json:"geo,omitempty"`

	// sriov enables the SR-IOV add-on.
	// +optional
	SRIOV *SRIOVSpec `json:"sriov,omitempty"`

	// registry configures the cluster's image registry certificate.
	// +optional
	Registry *RegistrySpec `json:"registry,omitempty"`

	// encryption configures how the CSI driver add-on (spec.addons.csi) encrypts volumes: it is
	// written into the driver's config and acts on nothing else. Without spec.addons.csi nothing
	// acts on it, and AddonsReady says so.
	// +optional
	Encryption *EncryptionSpec `json:"encryption,omitempty"`

	// addons are what the manager installs into the workload cluster, through the kubeconfig
	// Secret Cluster API writes (docs/capvco/addons.md). The cloud controller manager is always
	// installed; the others when set here.
	// +optional
	Addons AddonsSpec `json:"addons,omitempty,omitzero"`
}

// AddonsSpec configures the add-ons the manager installs into the workload cluster.
type AddonsSpec struct {
	// cloudControllerManager is capvco-cloud-controller-manager, without which no Node of the
	// cluster is initialised (the kubelets run with cloud-provider external).
	// +optional
	CloudControllerManager CCMAddonSpec `json:"cloudControllerManager,omitempty,omitzero"`

	// csi installs capvco-csi-driver with its StorageClasses, when set.
	// +optional
	CSI *CSIAddonSpec `json:"csi,omitempty"`

	// gpu installs the GPU add-on (docs/capvco/gpu.md), when set: the device plugin that makes
	// GPU machines' vGPUs schedulable. Unset, no GPU add-on is installed, GPU machines' nodes are
	// not labelled cluster-api/accelerator and their GPUs are left out of the scale-from-zero
	// capacity; removing it removes what it installed.
	// +optional
	GPU *GPUAddonSpec `json:"gpu,omitempty"`

	// externalDNS installs external-dns with the whitesky.cloud webhook provider
	// (docs/capvco/external-dns.md), when set; removing it removes what it installed (the DNS
	// records it made stay).
	// +optional
	ExternalDNS *ExternalDNSAddonSpec `json:"externalDNS,omitempty"`
}

// GPUAddonSpec selects the GPU add-on (the original provider's VCO_GPU_ADDON, which the cluster
// templates write here).
type GPUAddonSpec struct {
	// addon: nvidia (NVIDIA's device plugin and the nvidia RuntimeClass; the default when empty)
	// or none (nothing: stub GPU profiles, or a device plugin you install yourself).
	// +optional
	// +kubebuilder:validation:Enum=nvidia;none
	Addon string `json:"addon,omitempty"`
}

// ExternalDNSAddonSpec configures external-dns and its whitesky.cloud webhook provider.
type ExternalDNSAddonSpec struct {
	// credentialsSecretRef names the Secret, in the VCOCluster's namespace, whose credential keys
	// are copied into the workload cluster for the webhook. Default: the cluster's own
	// credentialsRef. It needs to read and write the customer's DNS records and read the
	// cluster's cloudspaces.
	// +optional
	CredentialsSecretRef *corev1.LocalObjectReference `json:"credentialsSecretRef,omitempty"`

	// domainFilters are the domains external-dns manages (names below them match too); empty:
	// every domain.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)*[a-z]{2,63}\.?$`
	DomainFilters []string `json:"domainFilters,omitempty"`

	// excludeDomains are left alone even below a domainFilters domain.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)*[a-z]{2,63}\.?$`
	ExcludeDomains []string `json:"excludeDomains,omitempty"`

	// sources are the kinds external-dns reads hostnames from: service, ingress (default both).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:items:Enum=service;ingress
	Sources []string `json:"sources,omitempty"`
}

// CCMAddonSpec configures the cloud controller manager add-on.
type CCMAddonSpec struct {
	// credentialsSecretRef names the Secret, in the VCOCluster's namespace, whose credential
	// keys are copied into the workload cluster's kube-system for the CCM. Default: the cluster's
	// own credentialsRef. Whoever administers the workload cluster can read the copy: scope it to
	// the cluster's cloudspaces (docs/capvco/addons.md).
	// +optional
	CredentialsSecretRef *corev1.LocalObjectReference `json:"credentialsSecretRef,omitempty"`
}

// CSIAddonSpec configures the CSI driver add-on.
type CSIAddonSpec struct {
	// credentialsSecretRef names the Secret, in the VCOCluster's namespace, with the driver's
	// credential: disks are location-scoped, so it needs a location grant. It is never defaulted
	// to the cluster's credential; its keys are copied into the workload cluster's kube-system.
	// +required
	CredentialsSecretRef corev1.LocalObjectReference `json:"credentialsSecretRef"`

	// defaultStorageClass marks the capvco-disk StorageClass as the cluster's default.
	// +optional
	DefaultStorageClass bool `json:"defaultStorageClass,omitempty"`
}

// CloudspaceSpec shapes a cloudspace.
// +kubebuilder:validation:XValidation:rule="!has(self.private) || !self.private",message="private cloudspaces are not supported yet: the control-plane endpoint needs a public address the management cluster can reach; use a normal cloudspace with no workload egress for air-gapped clusters"
type CloudspaceSpec struct {
	// private asks for a cloudspace with no external network. Not supported yet.
	// +optional
	Private *bool `json:"private,omitempty"`

	// externalNetworkID picks the external network; unset uses the location's default.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="externalNetworkID is immutable"
	ExternalNetworkID *int64 `json:"externalNetworkID,omitempty"`

	// privateNetwork is the cloudspace's private CIDR (default 192.168.103.0/24). Geo sites
	// need distinct ones.
	// +optional
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="privateNetwork must be a CIDR such as 192.168.103.0/24"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="privateNetwork is immutable"
	PrivateNetwork string `json:"privateNetwork,omitempty"`
}

// LoadBalancerSpec configures the control-plane load balancer.
type LoadBalancerSpec struct {
	// port the load balancer listens on (default 6443).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// healthCheckIntervalSeconds is how often the controller checks each API server and
	// updates the server pool: the platform's load balancer has no health checks of its own.
	// +optional
	// +kubebuilder:validation:Minimum=5
	// +kubebuilder:validation:Maximum=3600
	HealthCheckIntervalSeconds int32 `json:"healthCheckIntervalSeconds,omitempty"`
}

// DNSSpec publishes the control-plane endpoint in DNS.
type DNSSpec struct {
	// name is the fully qualified name of the A record, e.g. api.prod.example.com.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)+[a-z]{2,63}\.?$`
	Name string `json:"name"`
}

// GeoSpec spreads a cluster over several sites.
// +kubebuilder:validation:XValidation:rule="self.sites.all(s, self.sites.exists_one(o, o.name == s.name))",message="site names must be unique"
// +kubebuilder:validation:XValidation:rule="self.sites.all(s, s.name != 'primary')",message="site name primary is taken: it names the site in spec.location"
type GeoSpec struct {
	// sites of the cluster besides the primary one (which is spec.location and is named
	// "primary"). Each becomes a failure domain with its own cloudspace.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Sites []GeoSite `json:"sites"`

	// locationImages maps each location to the VM image id there: images are per location and
	// not portable, so every site's location needs its own.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	LocationImages map[string]int64 `json:"locationImages,omitempty"`

	// imagePublishCredentialSecretRef names an operator credential used to publish the images
	// of locationImages that the cluster's credential cannot see yet, so that every site's
	// location has its image (a customer credential gets 403 there).
	// +optional
	ImagePublishCredentialSecretRef *corev1.LocalObjectReference `json:"imagePublishCredentialSecretRef,omitempty"`
}

// GeoSite is one site of a geo cluster.
type GeoSite struct {
	// name of the site; also its failure domain name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// location of the site.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Location string `json:"location"`
	// privateNetwork of the site's cloudspace; must not overlap other sites'.
	// +optional
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="privateNetwork must be a CIDR such as 192.168.104.0/24"
	PrivateNetwork string `json:"privateNetwork,omitempty"`
}

// SRIOVSpec enables the SR-IOV add-on.
// +kubebuilder:validation:XValidation:rule="!self.enabled || has(self.credentialSecretRef)",message="sriov.credentialSecretRef is required when SR-IOV is enabled; it is never defaulted to the cluster credential, which would put customer-wide access on every worker. Use a credential scoped to this cluster's cloudspaces"
type SRIOVSpec struct {
	// enabled turns the add-on on.
	Enabled bool `json:"enabled"`
	// credentialSecretRef names the credential the SR-IOV agent uses on every worker. It is
	// readable from the nodes, so scope it to the cluster's cloudspaces.
	// +optional
	CredentialSecretRef *corev1.LocalObjectReference `json:"credentialSecretRef,omitempty"`
}

// RegistrySpec configures the registry certificate.
type RegistrySpec struct {
	// certificateSecretRef names a kubernetes.io/tls Secret (keys tls.crt and tls.key) with the
	// registry's certificate. The controller uploads it to the platform's SSL certificate store
	// under the certificate's domain and replaces the stored one when the Secret changes.
	// +optional
	CertificateSecretRef *corev1.LocalObjectReference `json:"certificateSecretRef,omitempty"`

	// certCredentialSecretRef names an operator credential for the SSL-certificate store
	// (a customer credential gets 403 there). Without it the cluster's credential is tried.
	// +optional
	CertCredentialSecretRef *corev1.LocalObjectReference `json:"certCredentialSecretRef,omitempty"`
}

// EncryptionSpec configures volume encryption.
// +kubebuilder:validation:XValidation:rule="self.vaultMode != 'managed'",message="vaultMode managed is not supported yet: use none, or external with your own vault"
// +kubebuilder:validation:XValidation:rule="self.vaultMode != 'external' || has(self.vaultAddress)",message="vaultAddress is required when vaultMode is external"
type EncryptionSpec struct {
	// vaultMode: none, external (your vault at vaultAddress) or managed (not supported yet).
	// +kubebuilder:validation:Enum=none;external;managed
	VaultMode string `json:"vaultMode"`
	// vaultAddress of the external vault.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	VaultAddress string `json:"vaultAddress,omitempty"`
	// transitKey is the vault's transit key that wraps each volume's key (vaultMode external).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	TransitKey string `json:"transitKey,omitempty"`
	// transitMount is the transit engine's mount path (default transit).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	TransitMount string `json:"transitMount,omitempty"`
	// vaultNamespace is the Vault Enterprise or OpenBao namespace, if any.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	VaultNamespace string `json:"vaultNamespace,omitempty"`
	// vaultTokenSecretRef names the Secret, in the VCOCluster's namespace, whose key token is a
	// vault token allowed to call datakey and decrypt on transitKey (vaultMode external). It is
	// copied into the workload cluster's kube-system, where the CSI controller and node plugin
	// mount it.
	// +optional
	VaultTokenSecretRef *corev1.LocalObjectReference `json:"vaultTokenSecretRef,omitempty"`
}

// VCOClusterStatus is the observed state of a VCOCluster.
type VCOClusterStatus struct {
	// conditions: Ready summarises the rest.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization is the CAPI contract's provisioning signal.
	// +optional
	Initialization InitializationStatus `json:"initialization,omitempty,omitzero"`

	// failureDomains are the cluster's sites.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`

	// cloudspaces of the cluster, one per site.
	// +optional
	// +listType=map
	// +listMapKey=site
	// +kubebuilder:validation:MaxItems=16
	Cloudspaces []CloudspaceStatus `json:"cloudspaces,omitempty"`

	// loadBalancer of the control plane.
	// +optional
	LoadBalancer *LoadBalancerStatus `json:"loadBalancer,omitempty"`

	// dns is the control-plane endpoint's DNS record, when spec.dns is set.
	// +optional
	DNS *DNSStatus `json:"dns,omitempty"`

	// locationImages are the images of spec.geo.locationImages as last checked: one the
	// cluster's credential sees is not checked again until the image or the publish credential
	// changes; one it does not see is checked again a minute after checkedAt.
	// +optional
	// +listType=map
	// +listMapKey=location
	// +kubebuilder:validation:MaxItems=16
	LocationImages []LocationImageStatus `json:"locationImages,omitempty"`

	// registryCertificate is the registry certificate as last written to the platform's SSL
	// certificate store: stored, it is not written again until the certificate or the
	// credential changes; failed, it is tried again a minute after checkedAt.
	// +optional
	RegistryCertificate *RegistryCertificateStatus `json:"registryCertificate,omitempty"`

	// addons are the add-ons as last applied to the workload cluster (AddonsReady sums them up).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Addons []AddonStatus `json:"addons,omitempty"`

	// platformCheckedAt is when the sites' cloudspaces, the load balancer and its server pool
	// were last read from the platform. Reconciles in between use cloudspaces and loadBalancer
	// as recorded here; they are read again when the API servers that answer differ from
	// loadBalancer.members, the spec changed, the last read did not find them all ready, or
	// platformCheckedAt is older than the machine resync (10 minutes by default).
	// +optional
	PlatformCheckedAt *metav1.Time `json:"platformCheckedAt,omitempty"`

	// observedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// CloudspaceStatus is one site's cloudspace.
type CloudspaceStatus struct {
	// site the cloudspace serves.
	Site string `json:"site"`
	// location of the cloudspace.
	Location string `json:"location"`
	// id of the cloudspace.
	// +optional
	ID string `json:"id,omitempty"`
	// name of the cloudspace (deterministic from namespace, cluster and site).
	Name string `json:"name"`
	// externalIP of the cloudspace.
	// +optional
	ExternalIP string `json:"externalIP,omitempty"`
	// adopted is true when the cloudspace existed already and was taken over by name (after a
	// clusterctl move, status is dropped and found again this way).
	// +optional
	Adopted bool `json:"adopted,omitempty"`
}

// LoadBalancerStatus is the control-plane load balancer.
type LoadBalancerStatus struct {
	// id of the load balancer.
	ID string `json:"id"`
	// serverPoolID of its backend pool.
	// +optional
	ServerPoolID string `json:"serverPoolID,omitempty"`
	// address it listens on.
	// +optional
	Address string `json:"address,omitempty"`
	// members currently in the server pool (healthy API servers).
	// +optional
	// +listType=atomic
	Members []string `json:"members,omitempty"`
}

// DNSStatus is the control-plane endpoint's A record.
type DNSStatus struct {
	// name of the record.
	Name string `json:"name"`
	// published is true once the platform has the record.
	Published bool `json:"published"`
	// ttlSeconds is the record's TTL: the platform fixes it at 3600 s with no override, so a
	// client may keep a stale address for up to an hour after a failover to another site.
	TTLSeconds int32 `json:"ttlSeconds"`
}

// LocationImageStatus is one location's image, as last checked.
type LocationImageStatus struct {
	// location of the image.
	// +kubebuilder:validation:MaxLength=128
	Location string `json:"location"`
	// id of the image there.
	ID int64 `json:"id"`
	// publishCredential is the Secret that was to publish it ("" when spec.geo names none).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PublishCredential string `json:"publishCredential,omitempty"`
	// visible: the cluster's credential saw the image at checkedAt.
	Visible bool `json:"visible"`
	// checkedAt is when the image was last checked.
	CheckedAt metav1.Time `json:"checkedAt"`
}

// RegistryCertificateStatus is the registry certificate as last written to the store.
type RegistryCertificateStatus struct {
	// domain the store files the certificate under.
	// +kubebuilder:validation:MaxLength=253
	Domain string `json:"domain"`
	// sha256 of the certificate, hex.
	// +kubebuilder:validation:MaxLength=64
	SHA256 string `json:"sha256"`
	// credential is the Secret that wrote (or tried to write) the store.
	// +kubebuilder:validation:MaxLength=253
	Credential string `json:"credential"`
	// stored: the store held this certificate at checkedAt.
	Stored bool `json:"stored"`
	// checkedAt is when the store was last written or checked.
	CheckedAt metav1.Time `json:"checkedAt"`
}

// AddonStatus is one add-on in the workload cluster.
type AddonStatus struct {
	// name of the add-on (cloud-controller-manager, csi-driver, ...).
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// version last applied: the manager's version, which tags the add-on's images.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Version string `json:"version,omitempty"`
	// hash of what was last applied (the rendered objects and the versions of the Secrets
	// copied); a different one is applied again.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Hash string `json:"hash,omitempty"`
	// available: every Deployment and DaemonSet of the add-on had its replicas available at
	// checkedAt.
	Available bool `json:"available"`
	// checkedAt is when the add-on was last applied or checked in the workload cluster.
	// +optional
	CheckedAt *metav1.Time `json:"checkedAt,omitempty"`
}

// InitializationStatus reports the CAPI contract's initialization.
// +kubebuilder:validation:MinProperties=1
type InitializationStatus struct {
	// provisioned is true once the infrastructure exists. It never goes back to false.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=vcoclusters,scope=Namespaced,categories=cluster-api;capvco,shortName=vcoc
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned"
// +kubebuilder:printcolumn:name="Location",type="string",JSONPath=".spec.location"
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.host"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// VCOCluster is the InfraCluster of CAPVCO: one cloudspace per site, the control-plane load
// balancer, DNS and the geo mesh.
type VCOCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VCOClusterSpec   `json:"spec,omitempty"`
	Status VCOClusterStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions (CAPI's conditions.Getter).
func (c *VCOCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions sets the conditions (CAPI's conditions.Setter).
func (c *VCOCluster) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }

// +kubebuilder:object:root=true

// VCOClusterList is a list of VCOClusters.
type VCOClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VCOCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VCOCluster{}, &VCOClusterList{})
}
