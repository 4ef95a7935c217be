package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/inputs"
	"github.com/capx-io/capx/internal/captf/jobs"
)

// TestClusterNotTerraform: a machine of a Cluster of another provider runs with
// captf_cluster_outputs = {} and says so (DependenciesReady=False/ClusterNotTerraform); one whose
// TerraformCluster does not exist yet waits for it rather than running with {}.
func TestClusterNotTerraform(t *testing.T) {
	cluster := func(group, kind string) *clusterv1.Cluster {
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "prod"}}
		c.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: group, Kind: kind, Name: "prod"}
		return c
	}
	foreign := cluster("infrastructure.example.com", "OtherCluster")
	terraform := cluster(captfv1.GroupVersion.Group, captfv1.KindCluster)
	lookalike := cluster("infrastructure.example.com", captfv1.KindCluster)

	for _, tc := range []struct {
		name    string
		cluster *clusterv1.Cluster
		status  metav1.ConditionStatus
		reason  string
	}{
		{"another provider", foreign, metav1.ConditionFalse, captfv1.ClusterNotTerraformReason},
		{"a kind of the same name in another group", lookalike, metav1.ConditionFalse, captfv1.ClusterNotTerraformReason},
		{"a TerraformCluster", terraform, metav1.ConditionTrue, captfv1.DependenciesReadyReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			m := &captfv1.TerraformMachine{}
			p := &pass[*captfv1.TerraformMachine]{
				scope:  &reconcileScope[*captfv1.TerraformMachine]{Object: m, Cluster: tc.cluster},
				owner:  jobs.Owner{Kind: captfv1.KindMachine, Name: "m0"},
				status: &m.Status.WorkspaceStatus, init: &m.Status.Initialization,
				rendered: &inputs.Rendered{},
			}
			updateStatus(p, machineKind{})
			c := conditions.Get(m, captfv1.DependenciesReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(tc.status))
			g.Expect(c.Reason).To(Equal(tc.reason))
			if tc.status == metav1.ConditionFalse {
				g.Expect(c.Message).To(ContainSubstring("captf_cluster_outputs = {}"))
			}
		})
	}

	g := NewWithT(t)
	e := &engine{}
	exports, _, wait, err := e.clusterExports(context.Background(), foreign, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wait).To(BeEmpty(), "another provider's cluster holds nothing")
	g.Expect(exports).To(BeNil(), "rendered as {}")
	_, _, wait, err = e.clusterExports(context.Background(), terraform, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wait).To(Equal(captfv1.WaitingForClusterInfrastructureReason), "a TerraformCluster not created yet is waited for")
}
