// Package planhash fingerprints, classifies and summarises OpenTofu/Terraform plans (the
// `show -json` document). An approval names a fingerprint, which the manager computes from the
// saved plan a Job stored; the approved apply applies that saved plan, so the fingerprint must
// change with every change in what the plan does, in the state it was made against, in the
// inputs it renders and in the saved plan file, and with nothing else. Everything here is a pure
// function of the plan, its binding and the plan key.
package planhash

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"
)

// Prefix marks the fingerprint scheme; a hash with another prefix is never accepted.
const Prefix = "p2:"

// Empty is the fingerprint of a plan without changes, whatever its binding: sha256 of the empty
// string. It needs no key, so a Job reports it itself.
const Empty = Prefix + "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// Parse decodes `show -json` output of a plan, keeping numbers verbatim (json.Number) so large
// integers hash exactly.
func Parse(b []byte) (*tfjson.Plan, error) {
	var p tfjson.Plan
	p.UseJSONNumber(true)
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("planhash: parse plan JSON: %w", err)
	}
	return &p, nil
}

// Binding is what an approval binds besides the changes themselves (DESIGN section 4): the
// state the plan was made against, the inputs it renders, and the saved plan file the approved
// apply will apply.
type Binding struct {
	// Lineage and Serial identify the state snapshot the plan was made against (the prior state
	// recorded in the saved plan file; OpenTofu refuses to apply the file to any other).
	Lineage string
	Serial  int64
	// InputsHash is the hash of the rendered inputs the plan's Job ran.
	InputsHash string
	// PlanFile is the hex SHA-256 of the saved plan file.
	PlanFile string
	// View is the hex SHA-256 of the readable changes published for approvers (the plan's
	// TerraformPlanViews): approving the hash approves what they show. Empty for a plan recorded
	// without one (it is then left out of the binding, as it was before views were bound).
	View string
}

// Fingerprint returns the keyed plan fingerprint:
//
//	p2: + hex(sha256(binding line + "\n" + sorted lines joined by "\n"))
//
// or Empty when the plan changes nothing (there is nothing to approve). The binding line is
//
//	binding|<hex HMAC-SHA256(key, canonical JSON of {lineage, serial, inputs, planFile[, view]})>
//
// followed by one line per resource change that is not a no-op (or is a no-op that imports or
// moves) and per output change that is not a no-op:
//
//	<address or output.<name>>|<actions comma-joined in plan order>|<hex HMAC-SHA256(key, effect)>
//
// The effect is the canonical JSON (sorted keys, no HTML escaping) of what the change does:
// for create and read the planned object with its unknown and sensitive markers; for update,
// replace and anything else the changed leaves only (see leafChanges); for delete and forget
// nothing; plus the import identity, the moved-from address and the deposed key when present.
// Untouched attributes therefore never perturb the fingerprint. The key makes the fingerprint
// unforgeable by anyone without it and keeps it from confirming guesses of sensitive values.
func Fingerprint(key []byte, plan *tfjson.Plan, b Binding) (string, error) {
	lines, err := changeLines(key, plan)
	if err != nil {
		return "", err
	}
	if len(lines) == 0 {
		return Empty, nil
	}
	binding := map[string]any{"lineage": b.Lineage, "serial": b.Serial, "inputs": b.InputsHash, "planFile": b.PlanFile}
	if b.View != "" {
		binding["view"] = b.View
	}
	mac, err := effectMAC(key, binding)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte("binding|" + mac + "\n" + strings.Join(lines, "\n")))
	return Prefix + hex.EncodeToString(sum[:]), nil
}

// SameChanges reports whether two plans make the same changes, as Fingerprint sees them
// (whatever their binding): the approved apply's second check, comparing the plan it makes
// again with the saved plan it was approved to apply. It needs no plan key: a fresh random one
// keys both sides.
func SameChanges(a, b *tfjson.Plan) (bool, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return false, err
	}
	la, err := changeLines(key, a)
	if err != nil {
		return false, err
	}
	lb, err := changeLines(key, b)
	if err != nil {
		return false, err
	}
	return slices.Equal(la, lb), nil
}

// changeLines are the sorted lines of the changes that count (see Fingerprint).
func changeLines(key []byte, plan *tfjson.Plan) ([]string, error) {
	if len(key) == 0 {
		return nil, errors.New("planhash: empty plan key: refusing to fingerprint without one")
	}
	if plan == nil {
		return nil, errors.New("planhash: no plan")
	}
	var lines []string
	for _, rc := range plan.ResourceChanges {
		if !counts(rc) {
			continue
		}
		mac, err := effectMAC(key, resourceEffect(rc))
		if err != nil {
			return nil, fmt.Errorf("planhash: fingerprint %s: %w", rc.Address, err)
		}
		lines = append(lines, rc.Address+"|"+joinActions(rc.Change.Actions)+"|"+mac)
	}
	for _, name := range sortedKeys(plan.OutputChanges) {
		ch := plan.OutputChanges[name]
		if !outputCounts(ch) {
			continue
		}
		mac, err := effectMAC(key, changeEffect(ch))
		if err != nil {
			return nil, fmt.Errorf("planhash: fingerprint output %s: %w", name, err)
		}
		lines = append(lines, "output."+name+"|"+joinActions(ch.Actions)+"|"+mac)
	}
	sort.Strings(lines)
	return lines, nil
}

// counts reports whether a resource change takes part in the fingerprint and the summary.
func counts(rc *tfjson.ResourceChange) bool {
	if rc == nil || rc.Change == nil {
		return false
	}
	if !isNoOp(rc.Change.Actions) {
		return true
	}
	return rc.Change.Importing != nil || moved(rc)
}

func outputCounts(ch *tfjson.Change) bool { return ch != nil && !isNoOp(ch.Actions) }

func isNoOp(a tfjson.Actions) bool { return len(a) == 0 || a.NoOp() }

func moved(rc *tfjson.ResourceChange) bool {
	return rc.PreviousAddress != "" && rc.PreviousAddress != rc.Address
}

func joinActions(a tfjson.Actions) string {
	s := make([]string, len(a))
	for i, x := range a {
		s[i] = string(x)
	}
	return strings.Join(s, ",")
}

func resourceEffect(rc *tfjson.ResourceChange) map[string]any {
	e := changeEffect(rc.Change)
	if imp := rc.Change.Importing; imp != nil {
		e["importing"] = map[string]any{"id": imp.ID, "identity": imp.Identity, "unknown": imp.Unknown}
	}
	if moved(rc) {
		e["previous_address"] = rc.PreviousAddress
	}
	if rc.DeposedKey != "" {
		e["deposed"] = rc.DeposedKey
	}
	return e
}

// changeEffect is what a change does, independent of attributes it leaves alone.
func changeEffect(ch *tfjson.Change) map[string]any {
	a := ch.Actions
	switch {
	case isNoOp(a), deleteOnly(a):
		return map[string]any{}
	case a.Create(), a.Read():
		return map[string]any{
			"after":           ch.After,
			"after_unknown":   ch.AfterUnknown,
			"after_sensitive": ch.AfterSensitive,
		}
	default:
		return map[string]any{"changes": leafChanges(ch)}
	}
}

// deleteOnly: delete and forget remove an object; what it contained is not part of the effect.
func deleteOnly(a tfjson.Actions) bool {
	return len(a) == 1 && (a[0] == tfjson.ActionDelete || a[0] == tfjson.ActionForget)
}

func effectMAC(key []byte, effect map[string]any) (string, error) {
	b, err := canonicalJSON(effect)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return hex.EncodeToString(m.Sum(nil)), nil
}

// canonicalJSON encodes with sorted object keys (encoding/json sorts map keys) and without
// HTML escaping, so the bytes depend only on the value.
func canonicalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
