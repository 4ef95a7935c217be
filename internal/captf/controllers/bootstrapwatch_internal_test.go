package controllers

import (
	"testing"

	. "github.com/onsi/gomega"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
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
		{"the pool that passes the Secret", contract.KindMachinePool,
			[]bootstrapConsumer{{"workers-bootstrap", ref(ours, contract.KindMachinePool, "workers")}},
			[]reconcile.Request{req("workers")}},
		{"every pool that shares it", contract.KindMachinePool,
			[]bootstrapConsumer{
				{"workers-bootstrap", ref(ours, contract.KindMachinePool, "a")},
				{"other-bootstrap", ref(ours, contract.KindMachinePool, "b")},
				{"workers-bootstrap", ref(ours, contract.KindMachinePool, "c")},
			},
			[]reconcile.Request{req("a"), req("c")}},
		{"a machine waiting for its Secret", contract.KindMachine,
			[]bootstrapConsumer{{"workers-bootstrap", ref(ours, contract.KindMachine, "m0")}},
			[]reconcile.Request{req("m0")}},
		{"a pool of another API group", contract.KindMachinePool,
			[]bootstrapConsumer{{"workers-bootstrap", ref("infrastructure.example.com", contract.KindMachinePool, "workers")}},
			nil},
		{"another provider's kind", contract.KindMachinePool,
			[]bootstrapConsumer{{"workers-bootstrap", ref(ours, "AWSMachinePool", "workers")}, {"workers-bootstrap", ref(ours, contract.KindMachine, "workers")}},
			nil},
		{"another Secret", contract.KindMachinePool,
			[]bootstrapConsumer{{"old-bootstrap", ref(ours, contract.KindMachinePool, "workers")}},
			nil},
		{"no bootstrap Secret yet", contract.KindMachinePool,
			[]bootstrapConsumer{{"", ref(ours, contract.KindMachinePool, "workers")}},
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(bootstrapUsers(tc.kind, "team-a", "workers-bootstrap", tc.consumers)).To(Equal(tc.want))
		})
	}
}
