// Package v1alpha1 holds the CAPVCO API: Cluster API infrastructure kinds that provision
// clusters on the whitesky.cloud VM platform (cloudspaces, VMs, load balancers, DNS, geo sites,
// vGPU reservations).
//
// VCOCluster and VCOMachine are the InfraCluster and InfraMachine of the Cluster API contract
// v1beta2.
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.cluster.x-k8s.io
package v1alpha1
