package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// VCOMachineFinalizer keeps a VCOMachine until its VM and vGPU reservations are gone.
const VCOMachineFinalizer = "vcomachine.infrastructure.cluster.x-k8s.io"

// VCOMachineSpec is the desired VM. A VM is immutable infrastructure: roll out a new Machine to
// change its shape.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerID) || (has(self.providerID) && self.providerID == oldSelf.providerID)",message="providerID is set once, by the controller, and never changes"
// +kubebuilder:validation:XValidation:rule="self.image == oldSelf.image && self.vcpus == oldSelf.vcpus && self.memoryMiB == oldSelf.memoryMiB && self.bootDiskGiB == oldSelf.bootDiskGiB",message="image, vcpus, memoryMiB and bootDiskGiB are immutable: roll out a new Machine instead"
// +kubebuilder:validation:XValidation:rule="has(self.gpu) == has(oldSelf.gpu) && (!has(self.gpu) || self.gpu == oldSelf.gpu)",message="gpu is immutable: roll out a new Machine instead"
type VCOMachineSpec struct {
	// providerID is written once by the controller: vco://<location>/<vm id>.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`

	// image of the VM. On a geo cluster, spec.geo.locationImages of the VCOCluster picks the
	// image in each site's location and this one serves the primary location.
	// +required
	Image ImageSpec `json:"image"`

	// vcpus of the VM.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	VCPUs int32 `json:"vcpus"`

	// memoryMiB of the VM.
	// +required
	// +kubebuilder:validation:Minimum=512
	// +kubebuilder:validation:Maximum=4194304
	MemoryMiB int32 `json:"memoryMiB"`

	// bootDiskGiB is the boot disk size.
	// +required
	// +kubebuilder:validation:Minimum=5
	// +kubebuilder:validation:Maximum=65536
	BootDiskGiB int32 `json:"bootDiskGiB"`

	// dataDisksGiB adds data disks of these sizes.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	DataDisksGiB []int32 `json:"dataDisksGiB,omitempty"`

	// gpu reserves vGPUs for the VM. A reservation is billed from the moment it exists, so the
	// controller names each one capvco_<namespace>_<cluster>_<machine>_gpu_<n> and releases every
	// one it owns when the machine or cluster goes.
	// +optional
	GPU *GPUSpec `json:"gpu,omitempty"`
}

// ImageSpec picks a VM image in a location.
// +kubebuilder:validation:XValidation:rule="has(self.id) != has(self.name)",message="set exactly one of image.id or image.name"
type ImageSpec struct {
	// id of the image in the location.
	// +optional
	ID *int64 `json:"id,omitempty"`
	// name of the image in the location.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name,omitempty"`
}

// GPUSpec asks for vGPUs.
// +kubebuilder:validation:XValidation:rule="has(self.profileId) || has(self.vendor)",message="set gpu.profileId or gpu.vendor"
type GPUSpec struct {
	// profileId pins the GPU profile.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ProfileID string `json:"profileId,omitempty"`
	// vendor picks any profile of this vendor when no profileId is set.
	// +optional
	// +kubebuilder:validation:Enum=nvidia;amd;intel
	Vendor string `json:"vendor,omitempty"`
	// count of vGPUs (default 1).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8
	Count int32 `json:"count,omitempty"`
	// driverVersion is an NVIDIA driver branch (e.g. "550") installed on first boot with the
	// NVIDIA container toolkit and containerd's nvidia runtime, from Ubuntu's archive and
	// NVIDIA's apt repository (needs egress); leave empty for a stub profile or an image that
	// carries the driver.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]{3,4}$')",message="gpu.driverVersion must be an NVIDIA driver branch such as 550: Ubuntu's archive ships the latest release of each branch; pin an exact release with an image of your own and leave driverVersion empty"
	DriverVersion string `json:"driverVersion,omitempty"`
}

// VCOMachineStatus is the observed state of a VCOMachine.
type VCOMachineStatus struct {
	// conditions: Ready summarises the rest.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization is the CAPI contract's provisioning signal.
	// +optional
	Initialization InitializationStatus `json:"initialization,omitempty,omitzero"`

	// vmID of the VM.
	// +optional
	VMID *int64 `json:"vmID,omitempty"`

	// cloudspaceID the VM runs in.
	// +optional
	CloudspaceID string `json:"cloudspaceID,omitempty"`

	// addresses of the VM.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Addresses []clusterv1.MachineAddress `json:"addresses,omitempty"`

	// failureDomain (site) the VM runs in.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`

	// vm is the VM as last read from the platform. A provisioned machine's VM is read again
	// at the end of the machine resync window (10 minutes by default, counted from the zero
	// time) that holds checkedAt, so that one deleted out of band is reported; the machines of
	// a cloudspace read in one window are read again together, from one listing. Reconciles in
	// between use this record.
	// +optional
	VM *VMStatus `json:"vm,omitempty"`

	// gpus reserved for the VM.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	GPUs []GPUStatus `json:"gpus,omitempty"`

	// observedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// VMStatus is the VM as last read.
type VMStatus struct {
	// name of the VM.
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// state the platform reported (RUNNING, HALTED, ...).
	// +kubebuilder:validation:MaxLength=64
	State string `json:"state"`
	// checkedAt is when it was read.
	CheckedAt metav1.Time `json:"checkedAt"`
}

// GPUStatus is one vGPU reservation.
type GPUStatus struct {
	// name of the reservation (capvco_<namespace>_<cluster>_<machine>_gpu_<n>).
	Name string `json:"name"`
	// id of the reservation.
	// +optional
	ID string `json:"id,omitempty"`
	// profileId of the reservation.
	// +optional
	ProfileID string `json:"profileId,omitempty"`
	// attached is true while the vGPU is attached to the VM.
	Attached bool `json:"attached"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=vcomachines,scope=Namespaced,categories=cluster-api;capvco,shortName=vcom
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned"
// +kubebuilder:printcolumn:name="ProviderID",type="string",JSONPath=".spec.providerID"
// +kubebuilder:printcolumn:name="Site",type="string",JSONPath=".status.failureDomain"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// VCOMachine is the InfraMachine of CAPVCO: one VM with cloud-init from the Machine's bootstrap
// data, and its vGPU reservations.
type VCOMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VCOMachineSpec   `json:"spec,omitempty"`
	Status VCOMachineStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions (CAPI's conditions.Getter).
func (m *VCOMachine) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions sets the conditions (CAPI's conditions.Setter).
func (m *VCOMachine) SetConditions(conds []metav1.Condition) { m.Status.Conditions = conds }

// +kubebuilder:object:root=true

// VCOMachineList is a list of VCOMachines.
type VCOMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VCOMachine `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VCOMachine{}, &VCOMachineList{})
}
