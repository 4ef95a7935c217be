package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// TerraformMachineFinalizer keeps a TerraformMachine until its infrastructure is destroyed.
const TerraformMachineFinalizer = "terraformmachine.infrastructure.cluster.x-k8s.io"

// TerraformMachineSpec is the desired infrastructure of one machine. A machine is immutable
// infrastructure: after the first successful apply, its module never applies again; a change
// means a new Machine. (variables are untyped, so their immutability is enforced by the admission
// policy in config/admission rather than a CRD rule.)
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerID) || (has(self.providerID) && self.providerID == oldSelf.providerID)",message="providerID is set once, by the controller, and never changes"
// +kubebuilder:validation:XValidation:rule="self.source == oldSelf.source",message="source is immutable: a machine is never re-applied; roll out a new Machine instead"
// +kubebuilder:validation:XValidation:rule="has(self.variablesFrom) == has(oldSelf.variablesFrom) && (!has(self.variablesFrom) || self.variablesFrom == oldSelf.variablesFrom)",message="variablesFrom is immutable: a machine is never re-applied; roll out a new Machine instead"
// +kubebuilder:validation:XValidation:rule="!has(self.drift) || !has(self.drift.action) || self.drift.action == 'Report'",message="machines only report drift: they are never re-applied, so drift.action must be Report"
type TerraformMachineSpec struct {
	// providerID is written once by the controller from the module's provider_id output.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`

	WorkspaceSpec `json:",inline"`
}

// TerraformMachineStatus is the observed state of a TerraformMachine.
type TerraformMachineStatus struct {
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

	// addresses from the module's addresses output.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Addresses []clusterv1.MachineAddress `json:"addresses,omitempty"`

	// failureDomain from the module's failure_domain output.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=terraformmachines,scope=Namespaced,categories=cluster-api;captf,shortName=tfm
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned"
// +kubebuilder:printcolumn:name="ProviderID",type="string",JSONPath=".spec.providerID"
// +kubebuilder:printcolumn:name="Job",type="string",JSONPath=".status.activeJob.operation"
// +kubebuilder:printcolumn:name="Machine",type="string",JSONPath=".metadata.ownerReferences[?(@.kind==\"Machine\")].name",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// TerraformMachine is the InfraMachine of CAPTF: a module of the machine role provisions one
// machine from the Machine's bootstrap data and reports its provider ID and addresses.
type TerraformMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TerraformMachineSpec   `json:"spec,omitempty"`
	Status TerraformMachineStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions (CAPI's conditions.Getter).
func (m *TerraformMachine) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions sets the conditions (CAPI's conditions.Setter).
func (m *TerraformMachine) SetConditions(conds []metav1.Condition) { m.Status.Conditions = conds }

// +kubebuilder:object:root=true

// TerraformMachineList is a list of TerraformMachines.
type TerraformMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformMachine `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TerraformMachine{}, &TerraformMachineList{})
}
