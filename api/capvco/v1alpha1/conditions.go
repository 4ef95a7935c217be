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
	// LoadBalancerReadyCondition reports the control-plane load balancer.
	LoadBalancerReadyCondition = "LoadBalancerReady"
	// DNSReadyCondition reports the control-plane DNS record.
	DNSReadyCondition = "DNSReady"
	// GeoMeshReadyCondition reports the connected cloudspaces between sites.
	GeoMeshReadyCondition = "GeoMeshReady"

	// VMReadyCondition reports the machine's VM.
	VMReadyCondition = "VMReady"
	// GPUsReadyCondition reports the machine's vGPU reservations.
	GPUsReadyCondition = "GPUsReady"

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

	// AdoptedLiveCloudspaceEvent is the Warning event emitted when a cloudspace adopted by name
	// already ran VMs: two VCOClusters may be managing the same infrastructure.
	AdoptedLiveCloudspaceEvent = "AdoptedLiveCloudspace"
)
