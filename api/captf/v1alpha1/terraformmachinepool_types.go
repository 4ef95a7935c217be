package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// TerraformMachinePoolFinalizer keeps a TerraformMachinePool until its infrastructure is destroyed.
const TerraformMachinePoolFinalizer = "terraformmachinepool.infrastructure.cluster.x-k8s.io"

// TerraformMachinePoolSpec is the desired infrastructure of a group of machines the module
// manages as one (an autoscaling group, a VM scale set). Every field is mutable: a change
// re-applies the module.
type TerraformMachinePoolSpec struct {
	// providerID of the group, from the module's provider_id output.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`

	// providerIDList lists the provider IDs of the pool's instances, from the module's
	// provider_id_list output. Written by the controller.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MaxLength=512
	ProviderIDList []string `json:"providerIDList,omitempty"`

	WorkspaceSpec `json:",inline"`

	// membershipRefreshIntervalSeconds is how often a refresh Job reads the pool's instances
	// (default 60).
	// +optional
	// +kubebuilder:validation:Minimum=15
	// +kubebuilder:validation:Maximum=86400
	MembershipRefreshIntervalSeconds *int32 `json:"membershipRefreshIntervalSeconds,omitempty"`
}

// TerraformMachinePoolStatus is the observed state of a TerraformMachinePool.
type TerraformMachinePoolStatus struct {
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

	// ready is true once the pool is provisioned, and stays true (latched with
	// initialization.provisioned). It is the InfraMachinePool signal of the v1beta1 contract,
	// kept because Cluster API's MachinePool controller (v1.14) still reads status.ready, not
	// initialization.provisioned, before it copies spec.providerIDList and status.replicas.
	// +optional
	Ready bool `json:"ready"`

	// replicas is the module's replicas output: the observed desired capacity.
	// +optional
	Replicas int32 `json:"replicas"`

	// infrastructureMachineKind is TerraformMachinePoolMachine once the pool keeps one per
	// instance: Cluster API's MachinePool controller then makes a Machine for each.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	InfrastructureMachineKind string `json:"infrastructureMachineKind,omitempty"`

	// instances from the module's instances output (at most 1000 kept).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Instances []MachinePoolInstance `json:"instances,omitempty"`
}

// MachinePoolInstance is one instance of a pool.
type MachinePoolInstance struct {
	// providerID of the instance.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`
	// instanceName is the module's instance_id.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	InstanceName string `json:"instanceName,omitempty"`
	// addresses of the instance.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Addresses []clusterv1.MachineAddress `json:"addresses,omitempty"`
	// failureDomain of the instance.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`
	// state of the instance as the module reports it.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	State string `json:"state,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=terraformmachinepools,scope=Namespaced,categories=cluster-api;captf,shortName=tfmp
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned"
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas"
// +kubebuilder:printcolumn:name="Job",type="string",JSONPath=".status.activeJob.operation"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// TerraformMachinePool is the InfraMachinePool of CAPTF: a module of the machinepool role
// provisions a group of machines and reports their provider IDs.
type TerraformMachinePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TerraformMachinePoolSpec   `json:"spec,omitempty"`
	Status TerraformMachinePoolStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions (CAPI's conditions.Getter).
func (p *TerraformMachinePool) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions sets the conditions (CAPI's conditions.Setter).
func (p *TerraformMachinePool) SetConditions(conds []metav1.Condition) { p.Status.Conditions = conds }

// +kubebuilder:object:root=true

// TerraformMachinePoolList is a list of TerraformMachinePools.
type TerraformMachinePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformMachinePool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TerraformMachinePool{}, &TerraformMachinePoolList{})
}
