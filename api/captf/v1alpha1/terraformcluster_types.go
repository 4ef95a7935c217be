package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// TerraformClusterFinalizer keeps a TerraformCluster until its infrastructure is destroyed.
const TerraformClusterFinalizer = "terraformcluster.infrastructure.cluster.x-k8s.io"

// TerraformClusterSpec is the desired cluster-wide infrastructure.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.controlPlaneEndpoint) || !has(oldSelf.controlPlaneEndpoint.host) || (has(self.controlPlaneEndpoint) && self.controlPlaneEndpoint == oldSelf.controlPlaneEndpoint)",message="controlPlaneEndpoint cannot change once set: machines and kubeconfigs already point at it"
type TerraformClusterSpec struct {
	// controlPlaneEndpoint is where the workload cluster's API server is reached. Leave it empty
	// to let the module's control_plane_endpoint output fill it (once).
	// +optional
	// +kubebuilder:validation:XValidation:rule="has(self.host) == has(self.port)",message="set host and port together"
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	WorkspaceSpec `json:",inline"`

	// defaults apply to the cluster's TerraformMachines and TerraformMachinePools that leave
	// the field unset.
	// +optional
	Defaults *WorkspaceDefaults `json:"defaults,omitempty"`

	// maxActiveJobs caps the Jobs running at once for this cluster's objects. Unset uses the
	// manager's --cluster-max-active-jobs.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxActiveJobs *int32 `json:"maxActiveJobs,omitempty"`
}

// WorkspaceDefaults are defaults a cluster gives its machines and pools.
type WorkspaceDefaults struct {
	// credentialsRef for machines and pools that set none.
	// +optional
	CredentialsRef *corev1.LocalObjectReference `json:"credentialsRef,omitempty"`
	// jobs policy merged under each machine's and pool's own.
	// +optional
	Jobs *JobPolicy `json:"jobs,omitempty"`
	// drift policy for machines and pools that set none.
	// +optional
	Drift *DriftPolicy `json:"drift,omitempty"`
}

// TerraformClusterStatus is the observed state of a TerraformCluster.
type TerraformClusterStatus struct {
	// conditions: Ready summarises; see docs/captf/conditions.md for the rest.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization is the CAPI contract's provisioning signal.
	// +optional
	Initialization InitializationStatus `json:"initialization,omitempty,omitzero"`

	WorkspaceStatus `json:",inline"`

	// failureDomains from the module's failure_domains output.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`

	// exports lists the top-level keys of the module's exports output (sorted, at most 100),
	// never its values: the output is sensitive, and machines and pools receive the values as
	// captf_cluster_outputs from the state. Informational: the controller never reads it.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Exports *apiextensionsv1.JSON `json:"exports,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=terraformclusters,scope=Namespaced,categories=cluster-api;captf,shortName=tfc
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned"
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.host"
// +kubebuilder:printcolumn:name="Job",type="string",JSONPath=".status.activeJob.operation"
// +kubebuilder:printcolumn:name="Image",type="string",JSONPath=".spec.source.image",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// TerraformCluster is the InfraCluster of CAPTF: a module of the cluster role provisions what the
// whole workload cluster shares (network, load balancer, DNS), reports the control-plane endpoint
// and failure domains, and exports values to the cluster's machines and pools.
type TerraformCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TerraformClusterSpec   `json:"spec,omitempty"`
	Status TerraformClusterStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions (CAPI's conditions.Getter).
func (c *TerraformCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions sets the conditions (CAPI's conditions.Setter).
func (c *TerraformCluster) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }

// +kubebuilder:object:root=true

// TerraformClusterList is a list of TerraformClusters.
type TerraformClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TerraformCluster{}, &TerraformClusterList{})
}
