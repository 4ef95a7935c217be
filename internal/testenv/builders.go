package testenv

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
)

// Builders for the objects tests create. Each returns a plain object with the smallest valid
// spec; tests adjust fields directly.

// Namespace returns a namespace.
func Namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// Cluster returns a CAPI Cluster whose infrastructure is the given kind and name.
func Cluster(ns, name, infraKind, infraName string) *clusterv1.Cluster {
	return &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: captfv1.GroupVersion.Group, Kind: infraKind, Name: infraName,
			},
		},
	}
}

// Machine returns a CAPI Machine of a cluster whose infrastructure is the given kind and name,
// with bootstrap data in the named Secret (empty: a bootstrap config that is not ready yet).
func Machine(ns, name, cluster, infraKind, infraName, bootstrapSecret string) *clusterv1.Machine {
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster},
		},
		Spec: clusterv1.MachineSpec{
			ClusterName: cluster,
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: captfv1.GroupVersion.Group, Kind: infraKind, Name: infraName,
			},
		},
	}
	m.Spec.Bootstrap = bootstrap(name, bootstrapSecret)
	return m
}

// MachinePool returns a CAPI MachinePool of a cluster with the given replicas.
func MachinePool(ns, name, cluster, infraKind, infraName, bootstrapSecret string, replicas int32) *clusterv1.MachinePool {
	p := &clusterv1.MachinePool{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster},
		},
		Spec: clusterv1.MachinePoolSpec{
			ClusterName: cluster,
			Replicas:    ptr.To(replicas),
			Template: clusterv1.MachineTemplateSpec{
				Spec: clusterv1.MachineSpec{
					ClusterName: cluster,
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: captfv1.GroupVersion.Group, Kind: infraKind, Name: infraName,
					},
				},
			},
		},
	}
	p.Spec.Template.Spec.Bootstrap = bootstrap(name, bootstrapSecret)
	return p
}

func bootstrap(name, secret string) clusterv1.Bootstrap {
	if secret != "" {
		return clusterv1.Bootstrap{DataSecretName: ptr.To(secret)}
	}
	return clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
		APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfig", Name: name,
	}}
}

// BootstrapSecret returns a bootstrap data Secret as CAPI bootstrap providers write it.
func BootstrapSecret(ns, name, cluster, value string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster},
		},
		Type: clusterv1.ClusterSecretType,
		Data: map[string][]byte{"value": []byte(value), "format": []byte("cloud-config")},
	}
}

// TerraformCluster returns a TerraformCluster of a cluster running the given module image.
func TerraformCluster(ns, name, cluster, image string) *captfv1.TerraformCluster {
	return &captfv1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster},
		},
		Spec: captfv1.TerraformClusterSpec{
			WorkspaceSpec: captfv1.WorkspaceSpec{Source: captfv1.WorkspaceSource{Image: image}},
		},
	}
}

// TerraformMachine returns a TerraformMachine of a cluster running the given module image.
func TerraformMachine(ns, name, cluster, image string) *captfv1.TerraformMachine {
	return &captfv1.TerraformMachine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster},
		},
		Spec: captfv1.TerraformMachineSpec{
			WorkspaceSpec: captfv1.WorkspaceSpec{Source: captfv1.WorkspaceSource{Image: image}},
		},
	}
}

// TerraformMachinePool returns a TerraformMachinePool of a cluster running the given module image.
func TerraformMachinePool(ns, name, cluster, image string) *captfv1.TerraformMachinePool {
	return &captfv1.TerraformMachinePool{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster},
		},
		Spec: captfv1.TerraformMachinePoolSpec{
			WorkspaceSpec: captfv1.WorkspaceSpec{Source: captfv1.WorkspaceSource{Image: image}},
		},
	}
}

// VCOCluster returns a VCOCluster of a cluster in a location with a credentials Secret.
func VCOCluster(ns, name, cluster, location, credentials string) *capvcov1.VCOCluster {
	return &capvcov1.VCOCluster{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster},
		},
		Spec: capvcov1.VCOClusterSpec{
			CredentialsRef: corev1.LocalObjectReference{Name: credentials},
			Location:       location,
		},
	}
}

// VCOMachine returns a VCOMachine of a cluster with a small VM shape.
func VCOMachine(ns, name, cluster string, imageID int64) *capvcov1.VCOMachine {
	return &capvcov1.VCOMachine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster},
		},
		Spec: capvcov1.VCOMachineSpec{
			Image: capvcov1.ImageSpec{ID: ptr.To(imageID)},
			VCPUs: 2, MemoryMiB: 4096, BootDiskGiB: 20,
		},
	}
}
