package inputs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/capx-io/capx/internal/captf/contract"
)

// HashPrefix marks the version of the inputs hash: h2 is sha256 over canonical JSON.
const HashPrefix = "h2:"

// Hash returns the inputs hash of a rendered terraform.tfvars.json: HashPrefix and the hex
// sha256 of the canonical JSON (keys sorted, no HTML escaping, numbers as written) of exactly
// the values the run receives. Nothing else enters it: no UID, generation, label or annotation
// is rendered, so clusterctl move, label edits and the controller's own spec write-backs never
// look like a change that needs an apply. It is computed from the rendered bytes, not from what
// they were rendered from, so the durable copy of an earlier run hashes the same after a
// restart or a move.
//
// Two values are left out: a machine pool's replicas while its autoscaling is enabled, since an
// autoscaler outside Cluster API owns the count then and each of its moves would otherwise
// start an apply; and a pool's current_instances, which is what the module last reported, not
// a wish: an instance that came or went outside OpenTofu starts no apply. Everything else counts, bootstrap_data included: an approval binds the exact
// inputs it was given, so a pool whose bootstrap token rotates while its plan waits plans again
// (the plan's inputs are no longer what would be applied) and the new plan waits for approval.
func Hash(role contract.Role, tfvars []byte) (string, error) {
	doc, err := decodeObject(tfvars)
	if err != nil {
		return "", fmt.Errorf("inputs: hash %s: %w", contract.VarsFile, err)
	}
	if role == contract.RoleMachinePool {
		delete(doc, inputCurrent)
		if autoscaling(doc) {
			delete(doc, inputReplicas)
		}
	}
	return hashOf(doc)
}

func autoscaling(doc map[string]any) bool {
	a, _ := doc[inputAutoscaling].(map[string]any)
	enabled, _ := a["enabled"].(bool)
	return enabled
}

func hashOf(doc map[string]any) (string, error) {
	b, err := marshalCanonical(doc)
	if err != nil {
		return "", fmt.Errorf("inputs: hash: %w", err)
	}
	sum := sha256.Sum256(b)
	return HashPrefix + hex.EncodeToString(sum[:]), nil
}

// decodeObject decodes a JSON object keeping numbers as written (json.Number), so that
// re-encoding it is canonical and a number such as 1.50 hashes as the user wrote it.
func decodeObject(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, jsonError(err, dec.InputOffset())
	}
	if doc == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	return doc, nil
}

// marshalCanonical is encoding/json with map keys sorted (as it always does) and without HTML
// escaping, which would turn "<" into "\u003c" and make the bytes differ from other encoders'.
func marshalCanonical(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
