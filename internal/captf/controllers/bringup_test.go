package controllers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/state"
	"github.com/capx-io/capx/internal/testenv"
)

// TestBringUpAndTearDown: a TerraformCluster, three TerraformMachines and a TerraformMachinePool
// go from creation to provisioned; machines and the pool wait for the cluster and receive its
// exports; their provider IDs reach spec (where CAPI reads them); deleting the cluster first
// waits for its machines and pool, which destroy before it does; no state is left.
func TestBringUpAndTearDown(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	kubelet := startManager(t)
	ns := env.NewNamespace(t)

	cluster := testenv.Cluster(ns, "prod", "TerraformCluster", "prod")
	create(t, cluster)
	tc := testenv.TerraformCluster(ns, "prod", "prod", clusterImage)
	tc.Spec.Variables = map[string]apiextensionsv1.JSON{"exports_extra": {Raw: []byte(`{"dns_zone":"prod.capx.test"}`)}}
	ownedBy(tc, cluster, "Cluster")
	create(t, tc)

	var tms []*captfv1.TerraformMachine
	for i := range 3 {
		name := fmt.Sprintf("m%d", i)
		create(t, testenv.BootstrapSecret(ns, name+"-bootstrap", "prod", "#cloud-config\nhostname: "+name))
		m := testenv.Machine(ns, name, "prod", "TerraformMachine", name, name+"-bootstrap")
		create(t, m)
		tm := testenv.TerraformMachine(ns, name, "prod", machineImage)
		ownedBy(tm, m, "Machine")
		create(t, tm)
		tms = append(tms, tm)
	}
	create(t, testenv.BootstrapSecret(ns, "workers-bootstrap", "prod", "#cloud-config\n"))
	mp := testenv.MachinePool(ns, "workers", "prod", "TerraformMachinePool", "workers", "workers-bootstrap", 3)
	create(t, mp)
	tmp := testenv.TerraformMachinePool(ns, "workers", "prod", poolImage)
	ownedBy(tmp, mp, "MachinePool")
	create(t, tmp)

	// Machines wait for the cluster's infrastructure before anything runs for them.
	waitFor(t, tms[0], time.Minute, "waiting for the cluster", func(o *captfv1.TerraformMachine) bool {
		c := conditions.Get(o, captfv1.DependenciesReadyCondition)
		return provisioned(tc.Status.Initialization) ||
			(c != nil && c.Reason == captfv1.WaitingForClusterInfrastructureReason)
	})

	waitFor(t, tc, 3*time.Minute, "provisioned", func(o *captfv1.TerraformCluster) bool {
		return provisioned(o.Status.Initialization)
	})
	for _, tm := range tms {
		waitFor(t, tm, 3*time.Minute, "provisioned with a provider ID", func(o *captfv1.TerraformMachine) bool {
			return provisioned(o.Status.Initialization) && o.Spec.ProviderID != ""
		})
		g.Expect(tm.Spec.ProviderID).To(HavePrefix("capx-test:///"))
		g.Expect(tm.Status.Addresses).NotTo(BeEmpty())
		g.Expect(conditions.IsTrue(tm, captfv1.ReadyCondition)).To(BeTrue(), describe(tm))
	}
	waitFor(t, tmp, 3*time.Minute, "provisioned with its instances", func(o *captfv1.TerraformMachinePool) bool {
		return provisioned(o.Status.Initialization) && len(o.Spec.ProviderIDList) == 3 && o.Status.Replicas == 3
	})

	// The machines received the cluster's exports as captf_cluster_outputs.
	stored := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "captf-inputs-m-m0"}, stored)).To(Succeed())
	var vars struct {
		Outputs map[string]any `json:"captf_cluster_outputs"`
	}
	g.Expect(json.Unmarshal(stored.Data[contract.VarsFile], &vars)).To(Succeed())
	g.Expect(vars.Outputs).To(HaveKeyWithValue("dns_zone", "prod.capx.test"))

	// One apply per object: the bring-up starts no needless Jobs.
	applies := 0
	for _, kind := range []string{captfv1.KindCluster, captfv1.KindMachine, captfv1.KindMachinePool} {
		for _, name := range []string{"prod", "m0", "m1", "m2", "workers"} {
			for _, j := range jobsOf(t, ns, kind, name) {
				if j.Labels[captfv1.OperationLabel] == string(captfv1.OperationApply) {
					applies++
				}
			}
		}
	}
	g.Expect(applies).To(Equal(5), "one apply Job per object")
	t.Logf("bring-up ran %d Pods", kubelet.Started())

	// Deleting the cluster first: it waits for its machines and pool.
	g.Expect(env.Client.Delete(ctx, tc)).To(Succeed())
	waitFor(t, tc, time.Minute, "deletion blocked by its dependents", func(o *captfv1.TerraformCluster) bool {
		return conditions.IsTrue(o, captfv1.DeletionBlockedCondition)
	})
	c := conditions.Get(tc, captfv1.DeletionBlockedCondition)
	g.Expect(c.Message).To(ContainSubstring("TerraformMachine/m0"))
	g.Expect(c.Message).To(ContainSubstring("TerraformMachinePool/workers"))

	for _, tm := range tms {
		g.Expect(env.Client.Delete(ctx, tm)).To(Succeed())
	}
	g.Expect(env.Client.Delete(ctx, tmp)).To(Succeed())
	for _, tm := range tms {
		gone(t, tm, 3*time.Minute)
	}
	gone(t, tmp, 3*time.Minute)
	gone(t, tc, 3*time.Minute)

	for _, o := range []struct{ kind, name string }{
		{captfv1.KindCluster, "prod"}, {captfv1.KindMachine, "m0"}, {captfv1.KindMachinePool, "workers"},
	} {
		_, err := state.Read(ctx, env.Client, ns, contract.StateSuffix(ns, o.kind, o.name))
		g.Expect(state.Reason(err)).To(Equal(captfv1.StateNotFoundReason), "%s %s left state behind", o.kind, o.name)
	}
	// Every object ran a destroy Job before its finalizer went.
	log := kubelet.Log.String()
	for _, prefix := range []string{"captf-c-prod-destroy", "captf-m-m0-destroy", "captf-mp-workers-destroy"} {
		g.Expect(strings.Contains(log, prefix)).To(BeTrue(), "no %s Job ran", prefix)
	}
}
