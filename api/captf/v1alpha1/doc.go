// Package v1alpha1 holds the CAPTF API: Cluster API infrastructure kinds whose infrastructure is
// provisioned by running OpenTofu/Terraform module images as Kubernetes Jobs.
//
// TerraformCluster, TerraformMachine and TerraformMachinePool are the InfraCluster, InfraMachine
// and InfraMachinePool of the Cluster API contract v1beta2. TerraformPlan records a plan that waits
// for a human decision. The module image contract these kinds drive is v1alpha1 (see docs/captf).
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.cluster.x-k8s.io
package v1alpha1
