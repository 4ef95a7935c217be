package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/scheme"
)

// TestBootstrapUsers: a bootstrap Secret event brings back exactly the CAPTF objects of the
// watched kind whose CAPI owner names that Secret; another provider's infrastructure, another
// kind and another Secret are left alone.
func TestBootstrapUsers(t *testing.T) {
	ref := func(group, kind, name string) clusterv1.ContractVersionedObjectReference {
		return clusterv1.ContractVersionedObjectReference{APIGroup: group, Kind: kind, Name: name}
	}
	ours := captfv1.GroupVersion.Group
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: name}}
	}
	for _, tc := range []struct {
		name      string
		kind      string
		consumers []bootstrapConsumer
		want      []reconcile.Request
	}{
		{"the pool that passes the Secret", captfv1.KindMachinePool,
			[]bootstrapConsumer{{"workers-bootstrap", ref(ours, captfv1.KindMachinePool, "workers")}},
			[]reconcile.Request{req("workers")}},
		{"every pool that shares it", captfv1.KindMachinePool,
			[]bootstrapConsumer{
				{"workers-bootstrap", ref(ours, captfv1.KindMachinePool, "a")},
				{"other-bootstrap", ref(ours, captfv1.KindMachinePool, "b")},
				{"workers-bootstrap", ref(ours, captfv1.KindMachinePool, "c")},
			},
			[]reconcile.Request{req("a"), req("c")}},
		{"a machine waiting for its Secret", captfv1.KindMachine,
			[]bootstrapConsumer{{"workers-bootstrap", ref(ours, captfv1.KindMachine, "m0")}},
			[]reconcile.Request{req("m0")}},
		{"a pool of another API group", captfv1.KindMachinePool,
			[]bootstrapConsumer{{"workers-bootstrap", ref("infrastructure.example.com", captfv1.KindMachinePool, "workers")}},
			nil},
		{"another provider's kind", captfv1.KindMachinePool,
			[]bootstrapConsumer{{"workers-bootstrap", ref(ours, "AWSMachinePool", "workers")}, {"workers-bootstrap", ref(ours, captfv1.KindMachine, "workers")}},
			nil},
		{"another Secret", captfv1.KindMachinePool,
			[]bootstrapConsumer{{"old-bootstrap", ref(ours, captfv1.KindMachinePool, "workers")}},
			nil},
		{"no bootstrap Secret yet", captfv1.KindMachinePool,
			[]bootstrapConsumer{{"", ref(ours, captfv1.KindMachinePool, "workers")}},
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(bootstrapUsers(tc.kind, "team-a", "workers-bootstrap", tc.consumers)).To(Equal(tc.want))
		})
	}
}

// TestConsumersReadTheIndex: the listers read the Machines and MachinePools of the namespace
// that name the Secret (bootstrapSecretIndex), not the others.
func TestConsumersReadTheIndex(t *testing.T) {
	g := NewWithT(t)
	machine := func(ns, name, secret string) *clusterv1.Machine {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		m.Spec.ClusterName = "c"
		m.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: captfv1.GroupVersion.Group, Kind: captfv1.KindMachine, Name: name}
		if secret != "" {
			m.Spec.Bootstrap.DataSecretName = &secret
		}
		return m
	}
	pool := func(ns, name, secret string) *clusterv1.MachinePool {
		mp := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		mp.Spec.Template.Spec.Bootstrap.DataSecretName = &secret
		return mp
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithObjects(machine("team-a", "m0", "s0"), machine("team-a", "m1", "s1"), machine("team-a", "m2", ""), machine("team-b", "m0", "s0"),
			pool("team-a", "p0", "s0"), pool("team-a", "p1", "s1")).
		WithIndex(&clusterv1.Machine{}, bootstrapSecretIndex, machineBootstrapSecret).
		WithIndex(&clusterv1.MachinePool{}, bootstrapSecretIndex, poolBootstrapSecret).Build()
	ms, err := machineConsumers(context.Background(), c, "team-a", "s0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ms).To(HaveLen(1))
	g.Expect(ms[0].infrastructure.Name).To(Equal("m0"))
	ps, err := poolConsumers(context.Background(), c, "team-a", "s1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ps).To(Equal([]bootstrapConsumer{{dataSecretName: "s1"}}))
	none, err := machineConsumers(context.Background(), c, "team-a", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(none).To(BeEmpty(), "a Machine without a bootstrap Secret is in no key")
}
