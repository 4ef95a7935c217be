package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// TerraformMachinePoolMachineFinalizer keeps a TerraformMachinePoolMachine until its instance
// has left the pool module's instances output.
const TerraformMachinePoolMachineFinalizer = "terraformmachinepoolmachine.infrastructure.cluster.x-k8s.io"

// TerraformMachinePoolMachineKind is the kind a TerraformMachinePool names in
// status.infrastructureMachineKind.
const TerraformMachinePoolMachineKind = "TerraformMachinePoolMachine"

// TerraformMachinePoolMachineSpec is one instance of a TerraformMachinePool, as the pool's
// module reports it. The pool's controller writes it; nothing here is for users to set.
type TerraformMachinePoolMachineSpec struct {
	// providerID of the instance, from the instances output's provider_id.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`

	// instanceID is the instance's id as the module's instances and instances_to_remove name
	// it: its instance_id, or its provider_id when the module reports no instance_id.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	InstanceID string `json:"instanceID,omitempty"`
}

// TerraformMachinePoolMachineStatus is the observed state of one pool instance.
type TerraformMachinePoolMachineStatus struct {
	// initialization is the CAPI contract's provisioning signal: provisioned once the instance
	// has a provider ID.
	// +optional
	Initialization InitializationStatus `json:"initialization,omitempty,omitzero"`

	// ready is true while the instance has a provider ID and its state is running (or not
	// reported).
	// +optional
	Ready bool `json:"ready"`

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
// +kubebuilder:resource:path=terraformmachinepoolmachines,scope=Namespaced,categories=cluster-api;captf,shortName=tfmpm
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster"
// +kubebuilder:printcolumn:name="Pool",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/pool-name']",description="MachinePool"
// +kubebuilder:printcolumn:name="Instance",type="string",JSONPath=".spec.instanceID"
// +kubebuilder:printcolumn:name="Ready",type="boolean",JSONPath=".status.ready"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// TerraformMachinePoolMachine is the infrastructure machine of one instance of a
// TerraformMachinePool (CAPI's MachinePool Machines): the pool's controller keeps one per
// instance of the module's instances output, and CAPI's MachinePool controller makes a Machine
// for each. Deleting it (CAPI does when its Machine is deleted) removes that instance.
type TerraformMachinePoolMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TerraformMachinePoolMachineSpec   `json:"spec,omitempty"`
	Status TerraformMachinePoolMachineStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// TerraformMachinePoolMachineList is a list of TerraformMachinePoolMachines.
type TerraformMachinePoolMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformMachinePoolMachine `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TerraformMachinePoolMachine{}, &TerraformMachinePoolMachineList{})
}
