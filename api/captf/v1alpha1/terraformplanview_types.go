package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=terraformplanviews,scope=Namespaced,categories=captf,shortName=tfplanview
// +kubebuilder:printcolumn:name="Plan",type="string",JSONPath=".plan"
// +kubebuilder:printcolumn:name="Part",type="integer",JSONPath=".part"
// +kubebuilder:printcolumn:name="Parts",type="integer",JSONPath=".parts"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// TerraformPlanView holds (a part of) the readable, redacted changes of a TerraformPlan: what
// `kubectl captf plan show` renders for an approver. The manager writes it when it records the
// plan, owned by the plan, and the plan's spec.viewDigest (bound into its plan hash) is the
// digest of the whole view: an approver reads it with the approver role alone, no Secret read.
// Only the manager writes views (config/admission/captf-plan-manager-fields.yaml); plan show
// refuses a view whose digest is not the plan's.
type TerraformPlanView struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// plan is the TerraformPlan whose changes these are.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Plan string `json:"plan"`
	// part is this object's place among the view's parts (0 is the first).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=15
	Part int32 `json:"part"`
	// parts is how many objects hold the view.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	Parts int32 `json:"parts"`
	// digest is the hex SHA-256 of the whole gzip-compressed view (every part's data in order).
	// +kubebuilder:validation:MinLength=64
	// +kubebuilder:validation:MaxLength=64
	Digest string `json:"digest"`
	// data is this part of the gzip-compressed JSON view.
	// +kubebuilder:validation:MaxLength=700000
	Data []byte `json:"data"`
}

// +kubebuilder:object:root=true

// TerraformPlanViewList is a list of TerraformPlanViews.
type TerraformPlanViewList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformPlanView `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TerraformPlanView{}, &TerraformPlanViewList{})
}
