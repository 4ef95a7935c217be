package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TerraformPlanSpec is a plan the manager recorded and the decision an operator takes on it.
// Everything but approved and approvedBy is written once by the manager.
// +kubebuilder:validation:XValidation:rule="self.targetRef == oldSelf.targetRef && self.planHash == oldSelf.planHash && self.inputsHash == oldSelf.inputsHash && self.reason == oldSelf.reason",message="only approved and approvedBy can change: the plan itself is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.summary) == has(oldSelf.summary) && (!has(self.summary) || self.summary == oldSelf.summary) && has(self.viewDigest) == has(oldSelf.viewDigest) && (!has(self.viewDigest) || self.viewDigest == oldSelf.viewDigest)",message="only approved and approvedBy can change: the summary and the view digest an approver reviews are the manager's, written once"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.approved) || !oldSelf.approved || (has(self.approved) && self.approved && self.approvedBy == oldSelf.approvedBy)",message="an approval cannot be withdrawn or re-attributed; let the plan be superseded instead"
// +kubebuilder:validation:XValidation:rule="has(self.approved) && self.approved ? (has(self.approvedBy) && size(self.approvedBy) > 0) : !has(self.approvedBy)",message="approvedBy is required when approved is true, and only then"
type TerraformPlanSpec struct {
	// targetRef names the object the plan belongs to, in the plan's namespace.
	TargetRef PlanTarget `json:"targetRef"`

	// planHash binds the approval to the plan's exact content (p2:<hex>): an approved apply
	// plans again and applies only if it gets the same hash.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=80
	PlanHash string `json:"planHash"`

	// inputsHash of the inputs the plan was made from (h2:<hex>).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=80
	InputsHash string `json:"inputsHash"`

	// reason the plan waits: Manual (applyPolicy Manual) or Destructive (the plan deletes or
	// replaces resources).
	Reason PlanReason `json:"reason"`

	// summary of the planned changes: counts and addresses, never values.
	// +optional
	Summary PlanSummary `json:"summary,omitempty,omitzero"`

	// viewDigest is the hex SHA-256 of the plan's readable changes (its TerraformPlanViews),
	// bound into planHash: approving the hash approves exactly the changes that view shows.
	// +optional
	// +kubebuilder:validation:MinLength=64
	// +kubebuilder:validation:MaxLength=64
	ViewDigest string `json:"viewDigest,omitempty"`

	// approved is set to true by an operator to let the apply run. It cannot be set back.
	// +optional
	Approved bool `json:"approved,omitempty"`

	// approvedBy is the approving user's name, exactly as the API server authenticated them; an
	// admission policy refuses any other value.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ApprovedBy string `json:"approvedBy,omitempty"`
}

// PlanTarget names the object a plan applies to.
type PlanTarget struct {
	// kind of the target.
	// +kubebuilder:validation:Enum=TerraformCluster;TerraformMachine;TerraformMachinePool
	Kind string `json:"kind"`
	// name of the target.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// PlanReason says why a plan waits for approval.
// +kubebuilder:validation:Enum=Manual;Destructive
type PlanReason string

const (
	// PlanReasonManual: the target's applyPolicy is Manual.
	PlanReasonManual PlanReason = "Manual"
	// PlanReasonDestructive: the plan deletes or replaces resources.
	PlanReasonDestructive PlanReason = "Destructive"
)

// PlanSummary counts a plan's changes.
type PlanSummary struct {
	// create counts resources to create.
	Create int32 `json:"create"`
	// update counts resources to update in place.
	Update int32 `json:"update"`
	// replace counts resources to delete and re-create.
	Replace int32 `json:"replace"`
	// delete counts resources to delete.
	Delete int32 `json:"delete"`
	// outputChanges counts changed outputs.
	// +optional
	OutputChanges int32 `json:"outputChanges,omitempty"`
	// resources lists up to 50 changed resources as "<address> (<actions>)".
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MaxLength=512
	Resources []string `json:"resources,omitempty"`
	// truncated is true when resources is incomplete.
	// +optional
	Truncated bool `json:"truncated,omitempty"`
	// endpointChange is set when the plan changes the control-plane endpoint away from the one
	// latched in the TerraformCluster's spec.controlPlaneEndpoint, which Cluster API never
	// follows: applied, the cluster is no longer reached where Cluster API looks for it. The
	// plan also carries the label captf.io/moves-endpoint=true.
	// +optional
	EndpointChange *PlanEndpointChange `json:"endpointChange,omitempty"`
}

// PlanEndpointChange is a plan's move of the latched control-plane endpoint.
type PlanEndpointChange struct {
	// latched is the endpoint Cluster API uses, host:port.
	// +kubebuilder:validation:MaxLength=300
	Latched string `json:"latched"`
	// planned is the endpoint the plan leaves, host:port, "(known after apply)" when the plan
	// cannot say yet, or "(none)" when it removes the output.
	// +kubebuilder:validation:MaxLength=300
	Planned string `json:"planned"`
}

// PlanPhase is where a plan is in its life.
// +kubebuilder:validation:Enum=Pending;Approved;Applied;Superseded;Failed
type PlanPhase string

const (
	// PlanPending waits for approval.
	PlanPending PlanPhase = "Pending"
	// PlanApproved is approved; its apply has not finished.
	PlanApproved PlanPhase = "Approved"
	// PlanApplied was applied.
	PlanApplied PlanPhase = "Applied"
	// PlanSuperseded was replaced by a newer plan or became moot.
	PlanSuperseded PlanPhase = "Superseded"
	// PlanFailed was approved, but the apply planned something else.
	PlanFailed PlanPhase = "Failed"
)

// TerraformPlanStatus is where the plan is.
type TerraformPlanStatus struct {
	// phase of the plan.
	// +optional
	Phase PlanPhase `json:"phase,omitempty"`
	// job that produced the plan; its log holds the human-readable plan.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Job string `json:"job,omitempty"`
	// conditions: Ready and Approved.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=terraformplans,scope=Namespaced,categories=captf,shortName=tfplan
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Target",type="string",JSONPath=".spec.targetRef.name"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".spec.reason"
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Create",type="integer",JSONPath=".spec.summary.create"
// +kubebuilder:printcolumn:name="Update",type="integer",JSONPath=".spec.summary.update"
// +kubebuilder:printcolumn:name="Replace",type="integer",JSONPath=".spec.summary.replace"
// +kubebuilder:printcolumn:name="Delete",type="integer",JSONPath=".spec.summary.delete"
// +kubebuilder:printcolumn:name="ApprovedBy",type="string",JSONPath=".spec.approvedBy"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// TerraformPlan is a plan waiting for (or past) an operator's approval. Approving it lets exactly
// that plan apply: the apply re-plans and stops if the plan hash differs.
type TerraformPlan struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TerraformPlanSpec   `json:"spec,omitempty"`
	Status TerraformPlanStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions.
func (p *TerraformPlan) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions sets the conditions.
func (p *TerraformPlan) SetConditions(conds []metav1.Condition) { p.Status.Conditions = conds }

// +kubebuilder:object:root=true

// TerraformPlanList is a list of TerraformPlans.
type TerraformPlanList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformPlan `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TerraformPlan{}, &TerraformPlanList{})
}
