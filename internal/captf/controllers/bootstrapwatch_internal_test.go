package controllers

import (
	"testing"

	. "github.com/onsi/gomega"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
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
