package controllers

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

func TestCredentialsToLabel(t *testing.T) {
	ref := func(n string) *corev1.LocalObjectReference { return &corev1.LocalObjectReference{Name: n} }
	cluster := &captfv1.TerraformCluster{}
	cluster.Spec.CredentialsRef = ref("cloud")
	cluster.Spec.Defaults = &captfv1.WorkspaceDefaults{CredentialsRef: ref("members")}
	own := func(n string) *captfv1.WorkspaceSpec {
		s := &captfv1.WorkspaceSpec{}
		if n != "" {
			s.CredentialsRef = ref(n)
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		owner  string
		spec   *captfv1.WorkspaceSpec
		object client.Object
		tc     *captfv1.TerraformCluster
		want   []string
	}{
		{"a cluster decides for its own and its members' default credentials", captfv1.KindCluster, &cluster.Spec.WorkspaceSpec, cluster, nil, []string{"cloud", "members"}},
		{"a machine on its cluster's defaults leaves it to the cluster", "TerraformMachine", own(""), &captfv1.TerraformMachine{}, cluster, nil},
		{"a machine naming its cluster's own Secret leaves it to the cluster", "TerraformMachine", own("cloud"), &captfv1.TerraformMachine{}, cluster, nil},
		{"a machine naming the members' default leaves it to the cluster", "TerraformMachine", own("members"), &captfv1.TerraformMachine{}, cluster, nil},
		{"a machine naming another Secret decides for it", "TerraformMachine", own("special"), &captfv1.TerraformMachine{}, cluster, []string{"special"}},
		{"a pool without a TerraformCluster decides for its own", "TerraformMachinePool", own("pool"), &captfv1.TerraformMachinePool{}, nil, []string{"pool"}},
		{"nothing named, nothing decided", "TerraformMachine", own(""), &captfv1.TerraformMachine{}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := credentialsToLabel(tc.owner, tc.spec, tc.object, tc.tc); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("credentialsToLabel = %q, want %q", got, tc.want)
			}
		})
	}
}
