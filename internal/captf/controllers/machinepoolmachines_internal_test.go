package controllers

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// TestPlanPoolMachines: one infrastructure machine per instance; an instance that goes takes
// its Machine with it; a Machine that goes (CAPI deleted its infrastructure machine) names its
// instance for removal until the instance is gone; remediation and the autoscaler's scale-down
// delete exactly the Machines they marked, and the scale-down waits while they drain.
func TestPlanPoolMachines(t *testing.T) {
	now := metav1.Now()
	inst := func(id string) captfv1.MachinePoolInstance {
		return captfv1.MachinePoolInstance{ProviderID: "capx-test:///" + id, InstanceName: id, State: "running"}
	}
	name := func(id string) string { return poolMachineName("workers", id) }
	infra := func(id string, deleting bool) captfv1.TerraformMachinePoolMachine {
		m := captfv1.TerraformMachinePoolMachine{ObjectMeta: metav1.ObjectMeta{Name: name(id),
			Finalizers: []string{captfv1.TerraformMachinePoolMachineFinalizer}}}
		if deleting {
			m.DeletionTimestamp = &now
		}
		return m
	}
	machine := func(id string, edit func(*clusterv1.Machine)) clusterv1.Machine {
		m := clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name(id)}, Spec: clusterv1.MachineSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{Kind: captfv1.TerraformMachinePoolMachineKind, Name: name(id)}}}
		if edit != nil {
			edit(&m)
		}
		return m
	}
	deleting := func(m *clusterv1.Machine) { m.DeletionTimestamp = &now }
	marked := func(m *clusterv1.Machine) {
		m.Annotations = map[string]string{clusterv1.DeleteMachineAnnotation: "yes"}
	}
	remediate := func(m *clusterv1.Machine) {
		m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineOwnerRemediatedCondition, Status: metav1.ConditionFalse,
			Reason: clusterv1.MachineOwnerRemediatedWaitingForRemediationReason}}
	}
	abc := []captfv1.MachinePoolInstance{inst("a"), inst("b"), inst("c")}
	live := func(ids ...string) []captfv1.TerraformMachinePoolMachine {
		var out []captfv1.TerraformMachinePoolMachine
		for _, id := range ids {
			out = append(out, infra(id, false))
		}
		return out
	}
	machines := func(ids ...string) []clusterv1.Machine {
		var out []clusterv1.Machine
		for _, id := range ids {
			out = append(out, machine(id, nil))
		}
		return out
	}

	for _, tc := range []struct {
		name           string
		in             poolMachinesIn
		ensure         []string // instance ids whose infrastructure machine is kept
		release, drop  []string // ids
		deleteMachines []machineDeletion
		remove         []string
		replicas       int32
	}{
		{name: "one infrastructure machine per instance",
			in:     poolMachinesIn{instances: abc, replicas: 3},
			ensure: []string{"a", "b", "c"}, replicas: 3},
		{name: "an instance without an id has none",
			in:     poolMachinesIn{instances: []captfv1.MachinePoolInstance{inst("a"), {State: "pending"}}, replicas: 2},
			ensure: []string{"a"}, replicas: 2},
		{name: "an instance gone: its Machine is deleted",
			in:     poolMachinesIn{instances: abc[:2], infra: live("a", "b", "c"), machines: machines("a", "b", "c"), replicas: 2},
			ensure: []string{"a", "b"}, replicas: 2,
			deleteMachines: []machineDeletion{{name("c"), machineInstanceGone}}},
		{name: "an instance gone before CAPI made its Machine: dropped",
			in:     poolMachinesIn{instances: abc[:2], infra: live("a", "b", "c"), machines: machines("a", "b"), replicas: 2},
			ensure: []string{"a", "b"}, release: []string{"c"}, drop: []string{"c"}, replicas: 2},
		{name: "an instance gone whose Machine is already going: CAPI deletes its infrastructure machine",
			in: poolMachinesIn{instances: abc[:2], infra: live("a", "b", "c"),
				machines: []clusterv1.Machine{machine("a", nil), machine("b", nil), machine("c", deleting)}, replicas: 2},
			ensure: []string{"a", "b"}, replicas: 2},
		{name: "a Machine deleted: its instance is removed at the same replicas (replaced)",
			in: poolMachinesIn{instances: abc, infra: []captfv1.TerraformMachinePoolMachine{infra("a", false), infra("b", true), infra("c", false)},
				machines: []clusterv1.Machine{machine("a", nil), machine("b", deleting), machine("c", nil)}, replicas: 3},
			ensure: []string{"a", "c"}, remove: []string{"b"}, replicas: 3},
		{name: "its instance gone: the finalizer goes",
			in: poolMachinesIn{instances: []captfv1.MachinePoolInstance{inst("a"), inst("c"), inst("d")},
				infra:    []captfv1.TerraformMachinePoolMachine{infra("a", false), infra("b", true), infra("c", false)},
				machines: []clusterv1.Machine{machine("a", nil), machine("b", deleting), machine("c", nil)}, replicas: 3},
			ensure: []string{"a", "c", "d"}, release: []string{"b"}, replicas: 3},
		{name: "remediation deletes the Machine; nothing is removed until CAPI deleted its infrastructure machine",
			in:     poolMachinesIn{instances: abc, infra: live("a", "b", "c"), machines: []clusterv1.Machine{machine("a", nil), machine("b", remediate), machine("c", nil)}, replicas: 3},
			ensure: []string{"a", "b", "c"}, replicas: 3,
			deleteMachines: []machineDeletion{{name("b"), machineRemediate}}},
		{name: "scale-down: the marked Machine is deleted and the replicas wait while it drains",
			in:     poolMachinesIn{instances: abc, infra: live("a", "b", "c"), machines: []clusterv1.Machine{machine("a", nil), machine("b", marked), machine("c", nil)}, replicas: 2},
			ensure: []string{"a", "b", "c"}, replicas: 3,
			deleteMachines: []machineDeletion{{name("b"), machineScaleDown}}},
		{name: "scale-down: still draining, still waiting",
			in:     poolMachinesIn{instances: abc, infra: live("a", "b", "c"), machines: []clusterv1.Machine{machine("a", nil), machine("b", deleting), machine("c", nil)}, replicas: 2},
			ensure: []string{"a", "b", "c"}, replicas: 3},
		{name: "scale-down: drained, exactly that instance goes at the lower replicas",
			in: poolMachinesIn{instances: abc, infra: []captfv1.TerraformMachinePoolMachine{infra("a", false), infra("b", true), infra("c", false)},
				machines: []clusterv1.Machine{machine("a", nil), machine("b", deleting), machine("c", nil)}, replicas: 2},
			ensure: []string{"a", "c"}, remove: []string{"b"}, replicas: 2},
		{name: "a marked Machine without a scale-down stays",
			in:     poolMachinesIn{instances: abc, infra: live("a", "b", "c"), machines: []clusterv1.Machine{machine("a", nil), machine("b", marked), machine("c", nil)}, replicas: 3},
			ensure: []string{"a", "b", "c"}, replicas: 3},
		{name: "no more marked Machines go than the scale-down asks, by name",
			in:     poolMachinesIn{instances: abc, infra: live("a", "b", "c"), machines: []clusterv1.Machine{machine("a", marked), machine("b", marked), machine("c", marked)}, replicas: 2},
			ensure: []string{"a", "b", "c"}, replicas: 3,
			deleteMachines: []machineDeletion{{slices.Min([]string{name("a"), name("b"), name("c")}), machineScaleDown}}},
		{name: "a scale-down without marks: the module chooses",
			in:     poolMachinesIn{instances: abc, infra: live("a", "b", "c"), machines: machines("a", "b", "c"), replicas: 1},
			ensure: []string{"a", "b", "c"}, replicas: 1},
		{name: "an id used again waits until the old Machine of its name is gone",
			in: poolMachinesIn{instances: abc, infra: live("a", "c"),
				machines: []clusterv1.Machine{machine("a", nil), machine("b", deleting), machine("c", nil)}, replicas: 3},
			ensure: []string{"a", "c"}, replicas: 3},
		{name: "the pool is going: every finalizer goes, no Machine is touched",
			in: poolMachinesIn{deleting: true, instances: abc, infra: []captfv1.TerraformMachinePoolMachine{infra("a", false), infra("b", true)},
				machines: machines("a", "b"), replicas: 3},
			release: []string{"a", "b"}, replicas: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tc.in.pool = "workers"
			out := planPoolMachines(tc.in)
			var ensured []string
			for _, m := range out.ensure {
				ensured = append(ensured, m.Spec.InstanceID)
				g.Expect(m.Name).To(Equal(name(m.Spec.InstanceID)))
				g.Expect(m.Spec.ProviderID).To(Equal("capx-test:///" + m.Spec.InstanceID))
				g.Expect(m.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
				g.Expect(m.Status.Ready).To(BeTrue())
			}
			names := func(ids []string) []string {
				var out []string
				for _, id := range ids {
					out = append(out, name(id))
				}
				return out
			}
			g.Expect(ensured).To(Equal(tc.ensure), "ensure")
			g.Expect(out.release).To(Equal(names(tc.release)), "release")
			g.Expect(out.drop).To(Equal(names(tc.drop)), "drop")
			g.Expect(out.deleteMachines).To(Equal(tc.deleteMachines), "deleteMachines")
			g.Expect(out.remove).To(Equal(tc.remove), "instances_to_remove")
			g.Expect(out.replicas).To(Equal(tc.replicas), "replicas")
			var current []string
			for _, in := range tc.in.instances {
				if id := instanceIDOf(in); id != "" {
					current = append(current, id)
				}
			}
			g.Expect(out.current).To(Equal(current), "current_instances")
		})
	}
}

// TestPoolMachineName: names are valid, stable and apart, whatever the ids and the pool's name.
func TestPoolMachineName(t *testing.T) {
	g := NewWithT(t)
	long := "a-very-long-machine-pool-name-that-goes-on-and-on-and-on-and-on-and-on"
	for _, pool := range []string{"workers", long, "pool.with.dots-"} {
		a, b := poolMachineName(pool, "i-1"), poolMachineName(pool, "vco://Some/ID with spaces")
		g.Expect(a).NotTo(Equal(b))
		g.Expect(a).To(Equal(poolMachineName(pool, "i-1")))
		for _, n := range []string{a, b} {
			g.Expect(len(n)).To(BeNumerically("<=", 63))
			g.Expect(n).To(MatchRegexp(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`))
		}
	}
}
