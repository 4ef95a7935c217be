package planhash

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// change is one resource change of a guard test plan.
type change struct {
	addr, module, reason, deposed string
	index                         any
	actions                       []string
}

// guardPlan builds a plan of a kind whose replicas input is now and whose replicas output was
// before (nil: no such variable or output change).
func guardPlan(t *testing.T, kind string, now, before any, changes ...change) map[string]any {
	t.Helper()
	vars := map[string]any{}
	if kind != "" {
		vars["captf_object"] = map[string]any{"value": map[string]any{"kind": kind, "name": "p", "namespace": "ns"}}
	}
	if now != nil {
		vars["replicas"] = map[string]any{"value": now}
	}
	outs := map[string]any{}
	if before != nil {
		outs["replicas"] = map[string]any{"actions": []string{"update"}, "before": before, "after": now,
			"before_sensitive": true, "after_sensitive": true}
	}
	var rcs []any
	for _, c := range changes {
		m := map[string]any{"address": c.addr, "mode": "managed", "type": "terraform_data", "name": "x",
			"change": map[string]any{"actions": c.actions, "before": map[string]any{}, "after": nil}}
		if c.module != "" {
			m["module_address"] = c.module
		}
		if c.reason != "" {
			m["action_reason"] = c.reason
		}
		if c.deposed != "" {
			m["deposed"] = c.deposed
		}
		if c.index != nil {
			m["index"] = c.index
		}
		rcs = append(rcs, m)
	}
	return map[string]any{"format_version": "1.2", "variables": vars, "output_changes": outs, "resource_changes": rcs}
}

// TestGuardedDeletes: in a machine pool, deletions that only follow a replica decrease apply
// without approval; every other delete or replace stays guarded, and so does every delete of
// any other kind.
func TestGuardedDeletes(t *testing.T) {
	const pool, cluster = "TerraformMachinePool", "TerraformCluster"
	del := []string{"delete"}
	countIndex := func(addr string) change {
		i := strings.LastIndex(addr, "[")
		n, err := strconv.Atoi(addr[i+1 : len(addr)-1])
		if err != nil {
			t.Fatal(err)
		}
		return change{addr: addr, module: "module.role", reason: "delete_because_count_index", index: n, actions: del}
	}
	group := change{addr: "module.role.terraform_data.group", module: "module.role", reason: "replace_because_cannot_update", actions: []string{"delete", "create"}}
	for _, tc := range []struct {
		name      string
		plan      map[string]any
		guarded   []string
		scaleDown bool
	}{
		{name: "3 to 2: the instance beyond the count", scaleDown: true,
			plan: guardPlan(t, pool, 2, 3, countIndex("module.role.terraform_data.instance[2]"))},
		{name: "3 to 1: two instances and their addresses", scaleDown: true,
			plan: guardPlan(t, pool, json.Number("1"), json.Number("3"), countIndex("module.role.terraform_data.instance[2]"),
				countIndex("module.role.terraform_data.instance[1]"), countIndex("module.role.terraform_data.address[1]"))},
		{name: "a for_each key the smaller pool drops", scaleDown: true,
			plan: guardPlan(t, pool, 1, 2, change{addr: `module.role.terraform_data.node["b"]`, module: "module.role", reason: "delete_because_each_key", actions: del})},
		{name: "a per-instance module instance that is gone", scaleDown: true,
			plan: guardPlan(t, pool, 1, 2, change{addr: "module.role.module.node[1].terraform_data.vm", module: "module.role.module.node[1]", reason: "delete_because_no_module", actions: del})},
		{name: "replicas from the command line are a string", scaleDown: true,
			plan: guardPlan(t, pool, "2", 3, countIndex("module.role.terraform_data.instance[2]"))},
		{name: "to zero", scaleDown: true,
			plan: guardPlan(t, pool, 0, 1, countIndex("module.role.terraform_data.instance[0]"))},

		{name: "a count index below the new replicas is not a dropped instance", scaleDown: true,
			plan:    guardPlan(t, pool, 2, 3, countIndex("module.role.terraform_data.instance[2]"), countIndex("module.role.terraform_data.lb[0]")),
			guarded: []string{"module.role.terraform_data.lb[0]"}},
		{name: "a count index the plan does not give", scaleDown: true,
			plan:    guardPlan(t, pool, 2, 3, change{addr: "module.role.terraform_data.instance[2]", module: "module.role", reason: "delete_because_count_index", actions: del}),
			guarded: []string{"module.role.terraform_data.instance[2]"}},
		{name: "a per-instance module instance below the new replicas", scaleDown: true,
			plan:    guardPlan(t, pool, 1, 2, change{addr: "module.role.module.node[0].terraform_data.vm", module: "module.role.module.node[0]", reason: "delete_because_no_module", actions: del}),
			guarded: []string{"module.role.module.node[0].terraform_data.vm"}},
		{name: "a per-instance module keyed by name", scaleDown: true,
			plan: guardPlan(t, pool, 1, 2, change{addr: `module.role.module.node["b"].terraform_data.vm`, module: `module.role.module.node["b"]`, reason: "delete_because_no_module", actions: del})},
		{name: "a scale-down that also replaces the group", scaleDown: true,
			plan:    guardPlan(t, pool, 2, 3, countIndex("module.role.terraform_data.instance[2]"), group),
			guarded: []string{"module.role.terraform_data.group"}},
		{name: "a scale-down that also drops a resource from the configuration", scaleDown: true,
			plan: guardPlan(t, pool, 2, 3, countIndex("module.role.terraform_data.instance[2]"),
				change{addr: "module.role.terraform_data.lb", module: "module.role", reason: "delete_because_no_resource_config", actions: del}),
			guarded: []string{"module.role.terraform_data.lb"}},
		{name: "a deposed object is never routine", scaleDown: true,
			plan: guardPlan(t, pool, 2, 3, change{addr: "module.role.terraform_data.instance[2]", module: "module.role",
				reason: "delete_because_count_index", deposed: "0000abcd", actions: del}),
			guarded: []string{"module.role.terraform_data.instance[2]"}},
		{name: "an instance replaced in a scale-down", scaleDown: true,
			plan: guardPlan(t, pool, 2, 3, change{addr: "module.role.terraform_data.instance[1]", module: "module.role",
				reason: "replace_because_tainted", actions: []string{"delete", "create"}}),
			guarded: []string{"module.role.terraform_data.instance[1]"}},
		{name: "a module instance without a key", scaleDown: true,
			plan:    guardPlan(t, pool, 1, 2, change{addr: "module.role.module.lb.terraform_data.x", module: "module.role.module.lb", reason: "delete_because_no_module", actions: del}),
			guarded: []string{"module.role.module.lb.terraform_data.x"}},

		{name: "replicas unchanged: a lower count is the module's own doing",
			plan:    guardPlan(t, pool, 3, nil, countIndex("module.role.terraform_data.instance[2]")),
			guarded: []string{"module.role.terraform_data.instance[2]"}},
		{name: "replicas unchanged, output rewritten",
			plan:    guardPlan(t, pool, 3, 3, countIndex("module.role.terraform_data.instance[2]")),
			guarded: []string{"module.role.terraform_data.instance[2]"}},
		{name: "replicas increased",
			plan:    guardPlan(t, pool, 4, 3, countIndex("module.role.terraform_data.disk[3]")),
			guarded: []string{"module.role.terraform_data.disk[3]"}},
		{name: "a cluster's plan, even with a replicas variable",
			plan:    guardPlan(t, cluster, 2, 3, countIndex("module.role.terraform_data.instance[2]")),
			guarded: []string{"module.role.terraform_data.instance[2]"}},
		{name: "a plan that names no object",
			plan:    guardPlan(t, "", 2, 3, countIndex("module.role.terraform_data.instance[2]")),
			guarded: []string{"module.role.terraform_data.instance[2]"}},
		{name: "replicas not a whole number",
			plan:    guardPlan(t, pool, 2.5, 3, countIndex("module.role.terraform_data.instance[2]")),
			guarded: []string{"module.role.terraform_data.instance[2]"}},
		{name: "creates and updates need nothing", scaleDown: true,
			plan: guardPlan(t, pool, 2, 3, change{addr: "module.role.terraform_data.group", actions: []string{"update"}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b, err := json.Marshal(tc.plan)
			g.Expect(err).NotTo(HaveOccurred())
			p, err := Parse(b)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ScaleDown(p)).To(Equal(tc.scaleDown), "scale-down")
			if tc.guarded == nil {
				g.Expect(GuardedDeletes(p)).To(BeEmpty())
			} else {
				g.Expect(GuardedDeletes(p)).To(Equal(tc.guarded))
			}
			g.Expect(Destructive(p)).To(Equal(len(tc.guarded) > 0), "Destructive is: some delete needs an approval")
		})
	}
	g := NewWithT(t)
	g.Expect(GuardedDeletes(nil)).To(BeNil())
	g.Expect(ScaleDown(nil)).To(BeFalse())
}

// TestRemovedInstancesAreRoutine: a pool's plan that removes the instances CAPTF names in
// instances_to_remove (their Machines are being deleted) drops them without an approval, at
// the same replicas (a MachineHealthCheck's replacement) as at fewer (the autoscaler's
// scale-down); an empty list changes nothing, and a replace stays guarded.
func TestRemovedInstancesAreRoutine(t *testing.T) {
	const pool = "TerraformMachinePool"
	dropB := change{addr: `module.role.terraform_data.instance["p-1"]`, module: "module.role", reason: "delete_because_each_key", actions: []string{"delete"}}
	group := change{addr: "module.role.terraform_data.group", module: "module.role", reason: "replace_because_cannot_update", actions: []string{"delete", "create"}}
	for _, tc := range []struct {
		name      string
		remove    []any
		plan      map[string]any
		scaleDown bool
		guarded   []string
	}{
		{name: "replaced at the same replicas", remove: []any{"p-1"}, scaleDown: true, plan: guardPlan(t, pool, 3, nil, dropB)},
		{name: "removed with one replica fewer", remove: []any{"p-1"}, scaleDown: true, plan: guardPlan(t, pool, 2, 3, dropB)},
		{name: "nothing named", remove: []any{}, plan: guardPlan(t, pool, 3, nil, dropB), guarded: []string{dropB.addr}},
		{name: "a replace beside a removal", remove: []any{"p-1"}, scaleDown: true, plan: guardPlan(t, pool, 3, nil, dropB, group),
			guarded: []string{group.addr}},
		{name: "a cluster's plan", remove: []any{"p-1"}, plan: guardPlan(t, "TerraformCluster", 3, nil, dropB), guarded: []string{dropB.addr}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tc.plan["variables"].(map[string]any)["instances_to_remove"] = map[string]any{"value": tc.remove}
			b, err := json.Marshal(tc.plan)
			g.Expect(err).NotTo(HaveOccurred())
			p, err := Parse(b)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ScaleDown(p)).To(Equal(tc.scaleDown), "routine removal")
			if tc.guarded == nil {
				g.Expect(GuardedDeletes(p)).To(BeEmpty())
			} else {
				g.Expect(GuardedDeletes(p)).To(Equal(tc.guarded))
			}
		})
	}
}

// FuzzGuardedDeletes: whatever the plan JSON, the guard lists only changes that delete, and
// lets none go unless the plan is a pool's scale-down.
func FuzzGuardedDeletes(f *testing.F) {
	for _, doc := range []string{
		`{"format_version":"1.2"}`,
		`{"format_version":"1.2","variables":{"captf_object":{"value":{"kind":"TerraformMachinePool"}},"replicas":{"value":2}},"output_changes":{"replicas":{"actions":["update"],"before":3,"after":2}},"resource_changes":[{"address":"module.role.terraform_data.instance[2]","module_address":"module.role","mode":"managed","action_reason":"delete_because_count_index","change":{"actions":["delete"]}}]}`,
		`{"format_version":"1.2","variables":{"captf_object":{"value":{"kind":"TerraformMachinePool"}},"replicas":{"value":"1"}},"output_changes":{"replicas":{"before":"x"}},"resource_changes":[{"address":"a","deposed":"d","action_reason":"delete_because_no_module","module_address":"module.x[1]","change":{"actions":["delete","create"]}}]}`,
		`{"format_version":"1.2","variables":{"captf_object":{"value":"TerraformMachinePool"},"replicas":{"value":1e99}},"resource_changes":[null,{"change":null}]}`,
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, err := Parse(doc)
		if err != nil {
			return
		}
		guarded := GuardedDeletes(p)
		all := 0
		for _, rc := range p.ResourceChanges {
			if deletes(rc) {
				all++
			}
		}
		if len(guarded) > all {
			t.Fatalf("%d guarded of %d deleting changes", len(guarded), all)
		}
		if !ScaleDown(p) && len(guarded) != all {
			t.Fatalf("outside a scale-down every delete is guarded: %d of %d", len(guarded), all)
		}
		if Destructive(p) != (len(guarded) > 0) {
			t.Fatal("Destructive disagrees with GuardedDeletes")
		}
	})
}
