package planhash

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"

	tfjson "github.com/hashicorp/terraform-json"
)

// Names in a machine pool's plan that the scale-down rule reads: the generated root module's
// captf_object and replicas variables and its re-exported replicas output.
const (
	poolKind       = captfv1.KindMachinePool
	objectVariable = "captf_object"
	replicasInput  = "replicas"
	replicasOutput = "replicas"
	removeInput    = "instances_to_remove"
)

// Destructive reports whether applying the plan removes a managed object that someone has to
// approve: any change whose actions include delete (a plain delete, a replace in either order,
// the delete of a deposed object), except a scale-down's (ScaleDown). Forget, import and move
// keep the object and are not destructive; data sources own nothing and never are.
func Destructive(plan *tfjson.Plan) bool {
	return len(GuardedDeletes(plan)) > 0
}

// GuardedDeletes lists, in plan order, the addresses of the changes that delete and need an
// approval: every one, except that in a machine pool's scale-down (ScaleDown) the removal of the
// instances the lower count drops is routine and applies without one.
func GuardedDeletes(plan *tfjson.Plan) []string {
	if plan == nil {
		return nil
	}
	replicas, scaleDown := scaleDownTo(plan)
	var out []string
	for _, rc := range plan.ResourceChanges {
		if !deletes(rc) || (scaleDown && dropsInstance(rc, replicas)) {
			continue
		}
		out = append(out, rc.Address)
	}
	return out
}

// ScaleDown reports whether the plan is a machine pool's (its captf_object is a
// TerraformMachinePool) and lowers the pool's replicas (the replicas input is below the replicas
// output the plan changes) or removes the instances CAPTF names in instances_to_remove (their
// Machines are being deleted: a MachineHealthCheck's remediation, the cluster autoscaler's
// scale-down, a person).
func ScaleDown(plan *tfjson.Plan) bool {
	_, ok := scaleDownTo(plan)
	return ok
}

// scaleDownTo returns the new replicas of a pool's scale-down.
func scaleDownTo(plan *tfjson.Plan) (int64, bool) {
	if plan == nil || plan.Variables == nil {
		return 0, false
	}
	obj := plan.Variables[objectVariable]
	if obj == nil {
		return 0, false
	}
	if o, _ := obj.Value.(map[string]any); o["kind"] != poolKind {
		return 0, false
	}
	in := plan.Variables[replicasInput]
	if in == nil {
		return 0, false
	}
	now, ok1 := number(in.Value)
	if rm := plan.Variables[removeInput]; ok1 && rm != nil {
		if names, _ := rm.Value.([]any); len(names) > 0 {
			return now, true
		}
	}
	out := plan.OutputChanges[replicasOutput]
	if out == nil {
		return 0, false
	}
	before, ok2 := number(out.Before)
	return now, ok1 && ok2 && now < before
}

// deletes reports whether a change removes a managed object.
func deletes(rc *tfjson.ResourceChange) bool {
	if rc == nil || rc.Change == nil || rc.Mode == tfjson.DataResourceMode {
		return false
	}
	for _, a := range rc.Change.Actions {
		if a == tfjson.ActionDelete {
			return true
		}
	}
	return false
}

// dropsInstance reports whether a change only removes an instance that a smaller count or
// for_each no longer declares, as the runtime itself says (action_reason): a plain delete,
// never a replace or a deposed object, of a resource instance out of range, or of a resource in
// a module instance (module.x[2]) that is gone. A count index must also lie at or beyond the new
// replicas: a lower count drops the last instances, so a dropped index below it (a load balancer
// at count = replicas > 2 ? 1 : 0, say) is not an instance of the pool and stays guarded.
func dropsInstance(rc *tfjson.ResourceChange, replicas int64) bool {
	if !rc.Change.Actions.Delete() || rc.DeposedKey != "" {
		return false
	}
	switch rc.ActionReason {
	case tfjson.ActionReasonDeleteBecauseCountIndex:
		i, ok := number(rc.Index)
		return ok && i >= replicas
	case tfjson.ActionReasonDeleteBecauseEachKey:
		return true
	case tfjson.ActionReasonDeleteBecauseNoModule:
		open := strings.LastIndex(rc.ModuleAddress, "[")
		if open < 0 || !strings.HasSuffix(rc.ModuleAddress, "]") {
			return false
		}
		key := rc.ModuleAddress[open+1 : len(rc.ModuleAddress)-1]
		if i, err := strconv.ParseInt(key, 10, 64); err == nil {
			return i >= replicas
		}
		return strings.HasPrefix(key, `"`) // a for_each key
	}
	return false
}

// number reads a whole number from plan JSON: a number, or a numeric string (an untyped root
// variable set from the command line).
func number(v any) (int64, bool) {
	var s string
	switch n := v.(type) {
	case json.Number:
		s = n.String()
	case float64:
		if n != math.Trunc(n) {
			return 0, false
		}
		return int64(n), true
	case string:
		s = n
	default:
		return 0, false
	}
	i, err := strconv.ParseInt(s, 10, 64)
	return i, err == nil
}
