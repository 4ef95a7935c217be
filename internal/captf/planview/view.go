package planview

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/capx-io/capx/internal/captf/contract"
)

// FormatVersion is the version of View's JSON shape in the Secret. Decode refuses others.
const FormatVersion = 1

// Masks for values that are not shown.
const (
	Sensitive = "(sensitive value)"
	Unknown   = "(known after apply)"
)

const (
	// MaxValueBytes cuts one rendered value.
	MaxValueBytes = 1024
	// MaxAttributes bounds the attribute changes listed per resource.
	MaxAttributes = 500
)

// Actions of a change, as the plan shows them.
const (
	ActionCreate  = "create"
	ActionUpdate  = "update"
	ActionReplace = "replace"
	ActionDelete  = "delete"
	ActionRead    = "read"
	ActionForget  = "forget"
	ActionNoop    = "no-op"
)

// View is a plan's readable changes.
type View struct {
	FormatVersion int `json:"formatVersion"`
	// Changes are the resource changes, deletes and replaces first, then by address.
	Changes []ResourceChange `json:"changes"`
	// Outputs are the changed outputs.
	Outputs []OutputChange `json:"outputs,omitempty"`
	// TotalChanges counts the plan's changes, including any Changes lost to truncation.
	TotalChanges int `json:"totalChanges"`
	// Truncated says the view was cut to fit its Secrets: attribute detail first, then changes.
	Truncated bool `json:"truncated,omitempty"`
	// Withheld says the manager built the view itself, with every change and no value: the
	// plan's Job stored none, or one that did not list the plan's changes.
	Withheld bool `json:"withheld,omitempty"`
}

// ResourceChange is one resource's change.
type ResourceChange struct {
	Address string `json:"address"`
	// Action is create, update, replace, delete, read, forget or no-op (moved or imported only).
	Action string `json:"action"`
	// ReplaceOrder for a replace: "delete-then-create" or "create-then-delete".
	ReplaceOrder string `json:"replaceOrder,omitempty"`
	// Reason is the plan's action_reason (replace_because_tainted, delete_because_no_resource_config, ...).
	Reason string `json:"reason,omitempty"`
	// MovedFrom is the previous address of a moved resource.
	MovedFrom string `json:"movedFrom,omitempty"`
	// ImportID is set for a resource being imported.
	Imported bool   `json:"imported,omitempty"`
	ImportID string `json:"importId,omitempty"`
	// Deposed is the deposed object key, for a change to a deposed object.
	Deposed string `json:"deposed,omitempty"`
	// ReplacePaths are the attributes that force the replacement.
	ReplacePaths []string `json:"replacePaths,omitempty"`
	// Attributes are the attribute-level changes; nil when AttributesOmitted.
	Attributes []AttributeChange `json:"attributes,omitempty"`
	// AttributesOmitted says the attribute detail was dropped (too many, or to fit the Secret).
	AttributesOmitted bool `json:"attributesOmitted,omitempty"`
}

// AttributeChange is one attribute's before and after. A nil Before is an added attribute, a
// nil After a removed one.
type AttributeChange struct {
	Path   string  `json:"path"`
	Before *string `json:"before,omitempty"`
	After  *string `json:"after,omitempty"`
	// ForcesReplacement marks a path listed in replace_paths.
	ForcesReplacement bool `json:"forcesReplacement,omitempty"`
}

// OutputChange is one output's change. Values follow the same masking as attributes.
type OutputChange struct {
	Name   string  `json:"name"`
	Action string  `json:"action"`
	Before *string `json:"before,omitempty"`
	After  *string `json:"after,omitempty"`
}

// Count returns the number of changes by action.
func (v *View) Count() map[string]int {
	n := map[string]int{}
	for _, c := range v.Changes {
		n[c.Action]++
	}
	return n
}

// PlanName is the name of the TerraformPlan the manager records for a plan that Job job made
// with hash planHash for the target object: the target's name and 10 hex characters of
// sha256(job/planHash). The runner uses it to name the plan's view before the plan exists.
func PlanName(target, job, planHash string) string {
	sum := sha256.Sum256([]byte(job + "/" + planHash))
	if len(target) > 242 {
		target = target[:242]
	}
	return target + "-" + hex.EncodeToString(sum[:])[:10]
}

// FromPlan builds the view of plan. redact is applied to every value shown (nil: none).
func FromPlan(plan *tfjson.Plan, redact func(string) string) *View {
	if redact == nil {
		redact = func(s string) string { return s }
	}
	v := &View{FormatVersion: FormatVersion}
	if plan == nil {
		return v
	}
	for _, rc := range plan.ResourceChanges {
		if rc == nil || rc.Change == nil {
			continue
		}
		c, ok := resourceChange(rc, redact)
		if !ok {
			continue
		}
		v.Changes = append(v.Changes, c)
	}
	sort.SliceStable(v.Changes, func(i, j int) bool {
		oi, oj := actionOrder(v.Changes[i].Action), actionOrder(v.Changes[j].Action)
		if oi != oj {
			return oi < oj
		}
		return CompareAddresses(v.Changes[i].Address, v.Changes[j].Address) < 0
	})
	v.TotalChanges = len(v.Changes)
	names := make([]string, 0, len(plan.OutputChanges))
	for n := range plan.OutputChanges {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ch := plan.OutputChanges[n]
		if ch == nil || ch.Actions.NoOp() || len(ch.Actions) == 0 {
			continue
		}
		oc := OutputChange{Name: redact(n), Action: action(ch.Actions)}
		beforeSensitive, afterSensitive := ch.BeforeSensitive, ch.AfterSensitive
		if contract.PublicOutput(n) {
			// Marked sensitive by the generated root module, not by the module: shown, so a plan
			// that moves the endpoint or the provider IDs does not look harmless.
			beforeSensitive, afterSensitive = nil, nil
		}
		if !ch.Actions.Create() {
			oc.Before = ptr(render(ch.Before, beforeSensitive, nil, redact))
		}
		if !ch.Actions.Delete() {
			oc.After = ptr(render(ch.After, afterSensitive, ch.AfterUnknown, redact))
		}
		v.Outputs = append(v.Outputs, oc)
	}
	return v
}

// EndpointChange compares the control-plane endpoint the plan leaves behind with latched, the
// endpoint Cluster API uses ("host:port"): it returns the planned endpoint and whether it
// differs. A plan that does not change the output leaves it; one whose new value is not known
// before the apply may move it (Unknown); one that removes it leaves none.
func EndpointChange(plan *tfjson.Plan, latched string) (planned string, moves bool) {
	if plan == nil {
		return "", false
	}
	ch := plan.OutputChanges[contract.OutputControlPlaneEndpoint]
	if ch == nil || len(ch.Actions) == 0 || ch.Actions.NoOp() {
		return "", false
	}
	switch {
	case ch.Actions.Delete():
		planned = "(none)"
	case containsTrue(ch.AfterUnknown):
		planned = Unknown
	default:
		ep, _ := ch.After.(map[string]any)
		host, _ := ep["host"].(string)
		planned = fmt.Sprintf("%s:%v", host, ep["port"])
	}
	return planned, planned != latched
}

// actionOrder puts what destroys first: deletes and replaces are what a reviewer must see.
func actionOrder(a string) int {
	switch a {
	case ActionDelete:
		return 0
	case ActionReplace:
		return 1
	case ActionForget:
		return 2
	case ActionUpdate:
		return 3
	case ActionCreate:
		return 4
	case ActionRead:
		return 5
	}
	return 6
}

func action(a tfjson.Actions) string {
	switch {
	case a.Replace():
		return ActionReplace
	case a.Create():
		return ActionCreate
	case a.Update():
		return ActionUpdate
	case a.Delete():
		return ActionDelete
	case a.Read():
		return ActionRead
	case a.Forget():
		return ActionForget
	}
	return ActionNoop
}

func resourceChange(rc *tfjson.ResourceChange, redact func(string) string) (ResourceChange, bool) {
	ch := rc.Change
	c := ResourceChange{
		Address: redact(rc.Address), Action: action(ch.Actions), Reason: string(rc.ActionReason),
		Deposed: rc.DeposedKey,
	}
	if rc.PreviousAddress != "" && rc.PreviousAddress != rc.Address {
		c.MovedFrom = redact(rc.PreviousAddress)
	}
	if ch.Importing != nil {
		c.Imported = true
		c.ImportID = redact(ch.Importing.ID)
	}
	if c.Action == ActionNoop && c.MovedFrom == "" && !c.Imported {
		return c, false
	}
	if c.Action == ActionReplace {
		c.ReplaceOrder = "delete-then-create"
		if len(ch.Actions) == 2 && ch.Actions[0] == tfjson.ActionCreate {
			c.ReplaceOrder = "create-then-delete"
		}
	}
	forces := map[string]bool{}
	for _, p := range ch.ReplacePaths {
		s := pathString(p)
		if s == "" {
			continue
		}
		c.ReplacePaths = append(c.ReplacePaths, redact(s))
		forces[s] = true
	}
	if c.Action == ActionForget || c.Action == ActionRead {
		return c, true
	}
	before := map[string]leaf{}
	after := map[string]leaf{}
	if !ch.Actions.Delete() || c.Action == ActionReplace {
		flatten("", ch.After, ch.AfterSensitive, ch.AfterUnknown, nil, after)
	}
	if !ch.Actions.Create() || c.Action == ActionReplace {
		// A value that becomes unknown as a whole is shown as one change, not as every leaf of
		// its old value removed.
		stop := map[string]bool{}
		for p, l := range after {
			if l.mask == Unknown {
				stop[p] = true
			}
		}
		flatten("", ch.Before, ch.BeforeSensitive, nil, stop, before)
	}
	if c.Action == ActionCreate {
		before = map[string]leaf{}
	}
	if c.Action == ActionDelete {
		after = map[string]leaf{}
	}
	dropEmptyParents(before, after)
	dropEmptyParents(after, before)
	paths := make([]string, 0, len(before)+len(after))
	for p := range before {
		paths = append(paths, p)
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		b, hasB := before[p]
		a, hasA := after[p]
		if hasA && hasB && a == b && !forces[p] {
			continue
		}
		ac := AttributeChange{Path: redact(p), ForcesReplacement: forces[p] || forcedByPrefix(p, forces)}
		if hasB {
			ac.Before = ptr(b.show(redact))
		}
		if hasA {
			ac.After = ptr(a.show(redact))
		}
		if len(c.Attributes) == MaxAttributes {
			c.AttributesOmitted = true
			c.Attributes = nil
			break
		}
		c.Attributes = append(c.Attributes, ac)
	}
	return c, true
}

// dropEmptyParents removes empty collections from a that b fills: {} becoming {"k": v} is the
// addition of k, not the removal of the map.
func dropEmptyParents(a, b map[string]leaf) {
	for p, l := range a {
		if l.mask != "" || (l.value != "{}" && l.value != "[]") {
			continue
		}
		if _, same := b[p]; same {
			continue
		}
		for q := range b {
			if strings.HasPrefix(q, p+".") || strings.HasPrefix(q, p+"[") {
				delete(a, p)
				break
			}
		}
	}
}

func forcedByPrefix(p string, forces map[string]bool) bool {
	for f := range forces {
		if strings.HasPrefix(p, f+".") || strings.HasPrefix(p, f+"[") {
			return true
		}
	}
	return false
}

// pathString renders a replace_paths entry (["a", 0, "b"]) as a.b[0]-style path.
func pathString(p any) string {
	steps, ok := p.([]any)
	if !ok {
		return ""
	}
	var b strings.Builder
	for _, s := range steps {
		switch s := s.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
		case json.Number:
			b.WriteString("[" + s.String() + "]")
		case float64:
			b.WriteString("[" + strconv.FormatFloat(s, 'f', -1, 64) + "]")
		default:
			return ""
		}
	}
	return b.String()
}

// leaf is one flattened value: a rendered scalar, or a mask.
type leaf struct {
	value string
	mask  string
}

func (l leaf) show(redact func(string) string) string {
	if l.mask != "" {
		return l.mask
	}
	return cut(redact(l.value))
}

func cut(s string) string {
	if len(s) <= MaxValueBytes {
		return s
	}
	i := MaxValueBytes
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + fmt.Sprintf("... (%d bytes)", len(s))
}

// flatten walks v with its sensitive and unknown masks (same shape, true at masked nodes, or a
// single true for the whole value) and records one leaf per scalar, empty collection or mask.
func flatten(path string, v, sens, unknown any, stop map[string]bool, out map[string]leaf) {
	if stop[pathOrSelf(path)] {
		if containsTrue(sens) {
			raw, _ := json.Marshal(v)
			out[pathOrSelf(path)] = leaf{value: string(raw), mask: Sensitive}
			return
		}
		raw, _ := json.Marshal(v)
		out[pathOrSelf(path)] = leaf{value: string(raw)}
		return
	}
	if isTrue(sens) {
		// The raw value is kept only to tell a changed secret from an unchanged one.
		raw, _ := json.Marshal(v)
		out[pathOrSelf(path)] = leaf{value: string(raw), mask: Sensitive}
		return
	}
	if isTrue(unknown) {
		out[pathOrSelf(path)] = leaf{mask: Unknown}
		return
	}
	switch t := v.(type) {
	case map[string]any:
		um, _ := unknown.(map[string]any)
		sm, _ := sens.(map[string]any)
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		for k := range um {
			if _, ok := t[k]; !ok {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			out[pathOrSelf(path)] = leaf{value: "{}"}
			return
		}
		for _, k := range keys {
			flatten(join(path, k), t[k], sm[k], um[k], stop, out)
		}
	case []any:
		ul, _ := unknown.([]any)
		sl, _ := sens.([]any)
		n := max(len(t), len(ul))
		if n == 0 {
			out[pathOrSelf(path)] = leaf{value: "[]"}
			return
		}
		for i := 0; i < n; i++ {
			var e, s, u any
			if i < len(t) {
				e = t[i]
			}
			if i < len(sl) {
				s = sl[i]
			}
			if i < len(ul) {
				u = ul[i]
			}
			flatten(path+"["+strconv.Itoa(i)+"]", e, s, u, stop, out)
		}
	case nil:
		if path != "" {
			out[path] = leaf{value: "null"}
		}
	case string:
		out[pathOrSelf(path)] = leaf{value: strconv.Quote(t)}
	case json.Number:
		out[pathOrSelf(path)] = leaf{value: t.String()}
	case bool:
		out[pathOrSelf(path)] = leaf{value: strconv.FormatBool(t)}
	case float64:
		out[pathOrSelf(path)] = leaf{value: strconv.FormatFloat(t, 'g', -1, 64)}
	default:
		b, _ := json.Marshal(t)
		out[pathOrSelf(path)] = leaf{value: string(b)}
	}
}

func pathOrSelf(p string) string {
	if p == "" {
		return "(value)"
	}
	return p
}

func join(path, key string) string {
	if !isIdent(key) {
		key = "[" + strconv.Quote(key) + "]"
		return path + key
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func isTrue(v any) bool { b, ok := v.(bool); return ok && b }

// render shows a whole value (an output) compactly, masked like attributes.
func render(v, sens, unknown any, redact func(string) string) string {
	if isTrue(sens) {
		return Sensitive
	}
	if isTrue(unknown) {
		return Unknown
	}
	if containsTrue(sens) {
		return Sensitive
	}
	if containsTrue(unknown) {
		return Unknown
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return cut(redact(string(b)))
}

func containsTrue(v any) bool {
	switch t := v.(type) {
	case bool:
		return t
	case map[string]any:
		for _, e := range t {
			if containsTrue(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if containsTrue(e) {
				return true
			}
		}
	}
	return false
}

func ptr(s string) *string { return &s }
