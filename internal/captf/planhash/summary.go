package planhash

import (
	"sort"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/capx-io/capx/internal/captf/runresult"
)

// Summarize returns the review summary of a plan: counts by kind of change, and at most
// runresult.MaxPlanResources "<address> (<labels>)" entries sorted by address, never values.
// Labels are the action (create, read, update, replace, delete, forget, or the actions joined
// by "+" for a combination without a name) followed by import, move and deposed where they
// apply.
func Summarize(plan *tfjson.Plan) runresult.PlanSummary {
	var s runresult.PlanSummary
	if plan == nil {
		return s
	}
	var entries []string
	for _, rc := range plan.ResourceChanges {
		if !counts(rc) {
			continue
		}
		a := rc.Change.Actions
		switch {
		case a.Create():
			s.Create++
		case a.Update():
			s.Update++
		case a.Replace():
			s.Replace++
		case a.Delete():
			s.Delete++
		}
		entries = append(entries, rc.Address+" ("+strings.Join(labels(rc), ", ")+")")
	}
	s.OutputChanges = outputChanges(plan)
	s.Resources, s.Truncated = firstSorted(entries, runresult.MaxPlanResources)
	return s
}

// DriftSummary summarises the plan a drift check makes after refreshing: every change it
// lists is a difference between the real objects and the configuration. Addresses are sorted
// and at most runresult.MaxDriftAddresses.
func DriftSummary(plan *tfjson.Plan) runresult.Drift {
	var d runresult.Drift
	if plan == nil {
		return d
	}
	var addrs []string
	for _, rc := range plan.ResourceChanges {
		if counts(rc) && rc.Mode != tfjson.DataResourceMode {
			addrs = append(addrs, rc.Address)
		}
	}
	d.Outputs = outputChanges(plan)
	d.Resources = len(addrs)
	d.Addresses, d.Truncated = firstSorted(addrs, runresult.MaxDriftAddresses)
	return d
}

func outputChanges(plan *tfjson.Plan) int {
	n := 0
	for _, ch := range plan.OutputChanges {
		if outputCounts(ch) {
			n++
		}
	}
	return n
}

func labels(rc *tfjson.ResourceChange) []string {
	var l []string
	switch a := rc.Change.Actions; {
	case isNoOp(a):
	case a.Replace():
		l = append(l, "replace")
	case len(a) == 1:
		l = append(l, string(a[0]))
	default:
		l = append(l, strings.ReplaceAll(joinActions(a), ",", "+"))
	}
	if rc.Change.Importing != nil {
		l = append(l, "import")
	}
	if moved(rc) {
		l = append(l, "move")
	}
	if rc.DeposedKey != "" {
		l = append(l, "deposed")
	}
	return l
}

func firstSorted(list []string, limit int) ([]string, bool) {
	sort.Strings(list)
	if len(list) > limit {
		return list[:limit], true
	}
	return list, false
}
