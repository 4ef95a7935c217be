package v1alpha1

// Condition types and reasons of the CAPVCO kinds (CAPI v1beta2 conventions: Ready summarises;
// waiting is Unknown).
const (
	// ReadyCondition summarises the object's other conditions.
	ReadyCondition = "Ready"

	// CredentialsReadyCondition reports whether the credential Secret is usable.
	CredentialsReadyCondition = "CredentialsReady"
	// CredentialsReadyReason: the credential authenticated.
	CredentialsReadyReason = "CredentialsReady"
	// CredentialsNotFoundReason: the Secret is missing.
	CredentialsNotFoundReason = "CredentialsNotFound"
	// CredentialsInvalidReason: the Secret lacks keys or the platform refused it.
	CredentialsInvalidReason = "CredentialsInvalid"

	// CloudspaceReadyCondition reports the cloudspaces of every site.
	CloudspaceReadyCondition = "CloudspaceReady"
	// LoadBalancerReadyCondition reports the control-plane load balancer and its server pool.
	LoadBalancerReadyCondition = "LoadBalancerReady"
	// DNSReadyCondition reports the control-plane DNS record.
	DNSReadyCondition = "DNSReady"
	// GeoMeshReadyCondition reports the connected cloudspaces between sites.
	GeoMeshReadyCondition = "GeoMeshReady"
	// LocationImagesReadyCondition reports whether every site's location has an image in
	// spec.geo.locationImages (images are per location and do not travel).
	LocationImagesReadyCondition = "LocationImagesReady"

	// RegistryCertificateReadyCondition reports the registry certificate in the platform's SSL
	// certificate store, when spec.registry.certificateSecretRef is set.
	RegistryCertificateReadyCondition = "RegistryCertificateReady"

	// AddonsReadyCondition reports the add-ons in the workload cluster: which are installed, at
	// which version, whether their workloads are available, and what failed. It is not part of
	// Ready: the add-ons can only be installed once the cluster's control plane runs.
	AddonsReadyCondition = "AddonsReady"

	// SRIOVAgentReadyCondition (with spec.sriov.enabled only) reports whether the SR-IOV agent
	// DaemonSet is available on the workload cluster's workers; False says why not (its reasons
	// are internal/capvco/sriov's, docs/capvco/sriov.md). It is not part of Ready.
	SRIOVAgentReadyCondition = "SRIOVAgentReady"

	// VMReadyCondition reports the machine's VM.
	VMReadyCondition = "VMReady"
	// GPUsReadyCondition reports the machine's vGPU reservations.
	GPUsReadyCondition = "GPUsReady"

	// CapacityPublishedCondition (VCOMachineTemplate) reports whether the scale-from-zero
	// capacity (status.capacity and the cluster-autoscaler annotations) describes the machines
	// completely.
	CapacityPublishedCondition = "CapacityPublished"

	// ProvisionedReason: the resource exists and is usable.
	ProvisionedReason = "Provisioned"
	// ProvisioningReason: the resource is being created.
	ProvisioningReason = "Provisioning"
	// ProvisioningFailedReason: the platform refused or failed the request; it is retried.
	ProvisioningFailedReason = "ProvisioningFailed"
	// WaitingForClusterReason: the VCOCluster is not provisioned yet.
	WaitingForClusterReason = "WaitingForCluster"
	// WaitingForBootstrapDataReason: the Machine's bootstrap Secret is not ready yet.
	WaitingForBootstrapDataReason = "WaitingForBootstrapData"
	// DeletingReason: the resource is being torn down.
	DeletingReason = "Deleting"
	// NotFoundReason: the resource was recorded in status but the platform no longer has it
	// (deleted out of band). It is reported and never silently recreated.
	NotFoundReason = "NotFound"
	// BootstrapDataUnsupportedReason: the VM's user_data cannot be built: spec.gpu.driverVersion
	// is not a driver branch, or the bootstrap data cannot carry the driver install (Ignition,
	// gzip, or not a cloud-init type). No VM is created until the spec or the data changes.
	BootstrapDataUnsupportedReason = "BootstrapDataUnsupported"
	// LocationImageMissingReason: a site's location has no entry in spec.geo.locationImages.
	LocationImageMissingReason = "LocationImageMissing"
	// LocationImageNotVisibleReason: an image of spec.geo.locationImages is not visible to the
	// cluster's credential and no operator credential published it.
	LocationImageNotVisibleReason = "LocationImageNotVisible"
	// OperatorCredentialForbiddenReason: the platform answered 403 to an operator action
	// (publishing an image, writing the SSL certificate store) with the credential used.
	OperatorCredentialForbiddenReason = "OperatorCredentialForbidden"
	// CertificateInvalidReason: the registry certificate Secret is missing or holds no usable
	// PEM certificate and key.
	CertificateInvalidReason = "CertificateInvalid"
	// ConnectingReason: a connected-cloudspace link exists but its tunnel is not up yet.
	ConnectingReason = "Connecting"
	// NotRequestedReason: the spec does not ask for this (no dns, a single site, no gpu).
	NotRequestedReason = "NotRequested"
	// CapacityPublishedReason: status.capacity and every scale-from-zero annotation are set.
	CapacityPublishedReason = "CapacityPublished"
	// GPUProfilePinnedReason: spec.gpu.profileId pins a profile, which does not name a vendor,
	// so the GPU is left out of the published capacity.
	GPUProfilePinnedReason = "GPUProfilePinned"
	// GPUVendorUnsupportedReason: the vendor's device plugin does not ship yet, so the GPU is
	// left out of the published capacity.
	GPUVendorUnsupportedReason = "GPUVendorUnsupported"
	// GPUAddonNotInstalledReason: the cluster's GPU add-on is none (or spec.addons.gpu is not
	// set), so no device plugin advertises the GPU and it is left out of the published capacity.
	GPUAddonNotInstalledReason = "GPUAddonNotInstalled"

	// WaitingForControlPlaneReason: the workload cluster's kubeconfig Secret (written by Cluster
	// API once the control plane is initialized) does not exist yet.
	WaitingForControlPlaneReason = "WaitingForControlPlane"
	// AddonsFailedReason: an add-on could not be rendered or applied; the message says which and
	// why.
	AddonsFailedReason = "AddonsFailed"
	// AddonsNotAvailableReason: the add-ons are applied but a Deployment or DaemonSet of theirs
	// does not have its replicas available yet.
	AddonsNotAvailableReason = "AddonsNotAvailable"

	// AdoptedLiveCloudspaceEvent is the Warning event emitted when a cloudspace adopted by name
	// already ran VMs: two VCOClusters may be managing the same infrastructure.
	AdoptedLiveCloudspaceEvent = "AdoptedLiveCloudspace"
	// VMNotFoundEvent is the Warning event emitted when a machine's VM disappeared out of band.
	VMNotFoundEvent = "VMNotFound"
	// LocationImagePublishedEvent is the Normal event emitted when the controller published an
	// image of spec.geo.locationImages with the operator credential.
	LocationImagePublishedEvent = "LocationImagePublished"
	// RegistryCertificateLeftEvent is the Warning event emitted when teardown had to leave the
	// registry certificate in the platform's SSL certificate store (the credential may not
	// delete it).
	RegistryCertificateLeftEvent = "RegistryCertificateLeft"
)
