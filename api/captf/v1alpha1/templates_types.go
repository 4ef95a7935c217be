package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// TerraformClusterTemplateSpec holds the template a ClusterClass clones TerraformClusters from.
type TerraformClusterTemplateSpec struct {
	// template is cloned into each new TerraformCluster.
	// +kubebuilder:validation:XValidation:rule="self.spec == oldSelf.spec",message="template.spec is immutable: create a new template and point the ClusterClass at it"
	Template TerraformClusterTemplateResource `json:"template"`
}

// TerraformClusterTemplateResource is the cloned part of a TerraformClusterTemplate.
type TerraformClusterTemplateResource struct {
	// metadata is merged into the clone's metadata.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// spec of the clone.
	Spec TerraformClusterSpec `json:"spec"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=terraformclustertemplates,scope=Namespaced,categories=cluster-api;captf
// +kubebuilder:storageversion

// TerraformClusterTemplate is a template for TerraformClusters.
type TerraformClusterTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TerraformClusterTemplateSpec `json:"spec,omitempty"`
}

// +kubebuilder:object:root=true

// TerraformClusterTemplateList is a list of TerraformClusterTemplates.
type TerraformClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformClusterTemplate `json:"items"`
}

// TerraformMachineTemplateSpec holds the template MachineDeployments and control planes clone
// TerraformMachines from.
type TerraformMachineTemplateSpec struct {
	// template is cloned into each new TerraformMachine.
	// +kubebuilder:validation:XValidation:rule="self.spec == oldSelf.spec",message="template.spec is immutable: create a new template and roll out to it"
	Template TerraformMachineTemplateResource `json:"template"`
}

// TerraformMachineTemplateResource is the cloned part of a TerraformMachineTemplate.
type TerraformMachineTemplateResource struct {
	// metadata is merged into the clone's metadata.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// spec of the clone.
	Spec TerraformMachineSpec `json:"spec"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=terraformmachinetemplates,scope=Namespaced,categories=cluster-api;captf
// +kubebuilder:storageversion

// TerraformMachineTemplate is a template for TerraformMachines.
type TerraformMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TerraformMachineTemplateSpec `json:"spec,omitempty"`
}

// +kubebuilder:object:root=true

// TerraformMachineTemplateList is a list of TerraformMachineTemplates.
type TerraformMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformMachineTemplate `json:"items"`
}

// TerraformMachinePoolTemplateSpec holds the template TerraformMachinePools are cloned from.
type TerraformMachinePoolTemplateSpec struct {
	// template is cloned into each new TerraformMachinePool.
	// +kubebuilder:validation:XValidation:rule="self.spec == oldSelf.spec",message="template.spec is immutable: create a new template and point the MachinePool at it"
	Template TerraformMachinePoolTemplateResource `json:"template"`
}

// TerraformMachinePoolTemplateResource is the cloned part of a TerraformMachinePoolTemplate.
type TerraformMachinePoolTemplateResource struct {
	// metadata is merged into the clone's metadata.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// spec of the clone.
	Spec TerraformMachinePoolSpec `json:"spec"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=terraformmachinepooltemplates,scope=Namespaced,categories=cluster-api;captf
// +kubebuilder:storageversion

// TerraformMachinePoolTemplate is a template for TerraformMachinePools.
type TerraformMachinePoolTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TerraformMachinePoolTemplateSpec `json:"spec,omitempty"`
}

// +kubebuilder:object:root=true

// TerraformMachinePoolTemplateList is a list of TerraformMachinePoolTemplates.
type TerraformMachinePoolTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformMachinePoolTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(
		&TerraformClusterTemplate{}, &TerraformClusterTemplateList{},
		&TerraformMachineTemplate{}, &TerraformMachineTemplateList{},
		&TerraformMachinePoolTemplate{}, &TerraformMachinePoolTemplateList{},
	)
}
