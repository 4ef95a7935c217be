package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// VCOClusterTemplateSpec holds the template a ClusterClass clones VCOClusters from.
type VCOClusterTemplateSpec struct {
	// template is cloned into each new VCOCluster.
	// +kubebuilder:validation:XValidation:rule="self.spec == oldSelf.spec",message="template.spec is immutable: create a new template and point the ClusterClass at it"
	Template VCOClusterTemplateResource `json:"template"`
}

// VCOClusterTemplateResource is the cloned part of a VCOClusterTemplate.
type VCOClusterTemplateResource struct {
	// metadata is merged into the clone's metadata.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// spec of the clone.
	Spec VCOClusterSpec `json:"spec"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=vcoclustertemplates,scope=Namespaced,categories=cluster-api;capvco
// +kubebuilder:storageversion

// VCOClusterTemplate is a template for VCOClusters.
type VCOClusterTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VCOClusterTemplateSpec `json:"spec,omitempty"`
}

// +kubebuilder:object:root=true

// VCOClusterTemplateList is a list of VCOClusterTemplates.
type VCOClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VCOClusterTemplate `json:"items"`
}

// VCOMachineTemplateSpec holds the template VCOMachines are cloned from.
type VCOMachineTemplateSpec struct {
	// template is cloned into each new VCOMachine.
	// +kubebuilder:validation:XValidation:rule="self.spec == oldSelf.spec",message="template.spec is immutable: create a new template and roll out to it"
	Template VCOMachineTemplateResource `json:"template"`
}

// VCOMachineTemplateResource is the cloned part of a VCOMachineTemplate.
type VCOMachineTemplateResource struct {
	// metadata is merged into the clone's metadata.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// spec of the clone.
	Spec VCOMachineSpec `json:"spec"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=vcomachinetemplates,scope=Namespaced,categories=cluster-api;capvco
// +kubebuilder:subresource:status
// +kubebuilder:storageversion

// VCOMachineTemplate is a template for VCOMachines. The controller publishes its machines'
// capacity in status.capacity and status.nodeInfo for the cluster autoscaler's scale from zero.
type VCOMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VCOMachineTemplateSpec   `json:"spec,omitempty"`
	Status VCOMachineTemplateStatus `json:"status,omitempty"`
}

// VCOMachineTemplateStatus is the observed state of a VCOMachineTemplate.
type VCOMachineTemplateStatus struct {
	// conditions: CapacityPublished says whether capacity describes the machines completely.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// capacity of each machine of the template, for the cluster autoscaler's scale from zero
	// (CAPI's InfraMachineTemplate contract): cpu, memory, ephemeral-storage (the boot disk)
	// and the GPU resource of a vendor whose device plugin ships.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`

	// nodeInfo is the architecture and operating system of the machines' nodes.
	// +optional
	NodeInfo NodeInfo `json:"nodeInfo,omitempty,omitzero"`
}

// NodeInfo is the architecture and operating system of a template's nodes.
// +kubebuilder:validation:MinProperties=1
type NodeInfo struct {
	// architecture of the nodes' CPUs: whitesky.cloud VMs are amd64.
	// +optional
	// +kubebuilder:validation:Enum=amd64;arm64;s390x;ppc64le
	Architecture string `json:"architecture,omitempty"`
	// operatingSystem of the nodes: linux.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	OperatingSystem string `json:"operatingSystem,omitempty"`
}

// GetConditions returns the conditions (CAPI's conditions.Getter).
func (t *VCOMachineTemplate) GetConditions() []metav1.Condition { return t.Status.Conditions }

// SetConditions sets the conditions (CAPI's conditions.Setter).
func (t *VCOMachineTemplate) SetConditions(conds []metav1.Condition) { t.Status.Conditions = conds }

// +kubebuilder:object:root=true

// VCOMachineTemplateList is a list of VCOMachineTemplates.
type VCOMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VCOMachineTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(
		&VCOClusterTemplate{}, &VCOClusterTemplateList{},
		&VCOMachineTemplate{}, &VCOMachineTemplateList{},
	)
}
