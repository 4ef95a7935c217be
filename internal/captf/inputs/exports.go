package inputs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/jobs"
)

// AppliedExportsKey is the data key of a pool's durable inputs Secret that records the cluster
// exports (captf_cluster_outputs) of the pool's last successful apply.
const AppliedExportsKey = "applied-exports.json"

// Values of captfv1.ExportsRecordAnnotation: the record is kept, or why it is not.
const (
	// ExportsKept: AppliedExportsKey holds the exports of the last successful apply.
	ExportsKept = "kept"
	// ExportsOverBudget: the record and the rendered inputs together would exceed MaxSize, the
	// budget the durable Secret's data must fit.
	ExportsOverBudget = "over-budget"
	// ExportsApplyFailed: an apply of other exports started and did not succeed; what it
	// changed before it stopped is unknown, so the earlier exports no longer describe the pool.
	ExportsApplyFailed = "apply-failed"
)

// ExportsRecord is what a pool's durable inputs Secret records of the cluster exports its
// infrastructure was last applied with. The controller holds a destructive change of the
// exports back with it: while the change waits for approval, the pool keeps applying with the
// recorded exports.
type ExportsRecord struct {
	// Exports are the exports of the last successful apply, canonical JSON; nil unless kept.
	Exports json.RawMessage
	// Status is ExportsKept, why the record is not kept (ExportsOverBudget,
	// ExportsApplyFailed), or "" before the first apply succeeded.
	Status string
	// Pending is the inputs hash of an apply that started with other exports and whose
	// outcome is not known yet.
	Pending string
}

// Usable reports whether the record may stand in for the cluster's exports: kept, and no
// apply of other exports is in flight or unaccounted for.
func (r ExportsRecord) Usable() bool {
	return r.Status == ExportsKept && r.Pending == "" && r.Exports != nil
}

// Equal reports whether two records say the same.
func (r ExportsRecord) Equal(o ExportsRecord) bool {
	return r.Status == o.Status && r.Pending == o.Pending && bytes.Equal(r.Exports, o.Exports) && (r.Exports == nil) == (o.Exports == nil)
}

// KeptExports is the record of an apply of r that succeeded: r's exports, unless they do not
// fit the durable Secret's budget beside r itself.
func KeptExports(r *Rendered) ExportsRecord {
	exports, err := ClusterOutputs(r.TFVars)
	if err != nil {
		return ExportsRecord{Status: ExportsApplyFailed}
	}
	if r.Size()+len(exports) > MaxSize {
		return ExportsRecord{Status: ExportsOverBudget}
	}
	return ExportsRecord{Exports: exports, Status: ExportsKept}
}

// ClusterOutputs returns the captf_cluster_outputs a rendered terraform.tfvars.json carries, as
// canonical JSON ({} when it has none).
func ClusterOutputs(tfvars []byte) (json.RawMessage, error) {
	doc, err := decodeObject(tfvars)
	if err != nil {
		return nil, fmt.Errorf("inputs: %s: %w", contract.VarsFile, err)
	}
	v, ok := doc[contract.InputClusterOutputs]
	if !ok || v == nil {
		return json.RawMessage(`{}`), nil
	}
	return marshalCanonical(v)
}

// SameExports reports whether two exports values are the same JSON (key order, spacing and
// number spelling aside); nil counts as {}.
func SameExports(a, b json.RawMessage) bool {
	ca, errA := canonicalValue(a)
	cb, errB := canonicalValue(b)
	return errA == nil && errB == nil && bytes.Equal(ca, cb)
}

func canonicalValue(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	if v == nil {
		v = map[string]any{}
	}
	return marshalCanonical(v)
}

// exportsRecordOf reads the record from a durable inputs Secret. Any Secret writer of the
// namespace can edit it: a record whose exports are not one JSON value is no record (it never
// stands in for the exports).
func exportsRecordOf(s *corev1.Secret) ExportsRecord {
	r := ExportsRecord{Status: s.Annotations[captfv1.ExportsRecordAnnotation], Pending: s.Annotations[captfv1.ExportsPendingAnnotation]}
	if r.Status == ExportsKept {
		if raw, ok := s.Data[AppliedExportsKey]; ok {
			if exports, err := canonicalValue(raw); err == nil {
				r.Exports = exports
			}
		}
	}
	return r
}

// markPending marks the record of a pool's durable inputs Secret pending when the inputs about
// to be written (an apply is about to start with them) carry other exports than the record:
// until that apply's outcome is known, the record no longer stands in for the exports.
func markPending(s *corev1.Secret, o jobs.Owner, r *Rendered) {
	if o.Kind != captfv1.KindMachinePool {
		return
	}
	rec := exportsRecordOf(s)
	if rec.Status != ExportsKept {
		return
	}
	exports, err := ClusterOutputs(r.TFVars)
	if err == nil && SameExports(exports, rec.Exports) {
		return
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[captfv1.ExportsPendingAnnotation] = r.Hash
}

// WriteExportsRecord makes the owner's durable inputs Secret carry rec, writing nothing when it
// already does. The update carries the read resourceVersion, so a concurrent write wins and the
// next reconcile decides again.
func WriteExportsRecord(ctx context.Context, c client.Client, o jobs.Owner, rec ExportsRecord) (bool, error) {
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: o.Namespace, Name: SecretName(o)}
	if err := c.Get(ctx, key, s); err != nil {
		return false, fmt.Errorf("inputs: read Secret %s/%s: %w", key.Namespace, key.Name, err)
	}
	have := exportsRecordOf(s)
	if have.Status == rec.Status && have.Pending == rec.Pending && bytes.Equal(have.Exports, rec.Exports) &&
		(rec.Exports != nil || s.Data[AppliedExportsKey] == nil) {
		return false, nil
	}
	next := s.DeepCopy()
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	setOrDelete(next.Annotations, captfv1.ExportsRecordAnnotation, rec.Status)
	setOrDelete(next.Annotations, captfv1.ExportsPendingAnnotation, rec.Pending)
	if rec.Exports != nil {
		if next.Data == nil {
			next.Data = map[string][]byte{}
		}
		next.Data[AppliedExportsKey] = rec.Exports
	} else {
		delete(next.Data, AppliedExportsKey)
	}
	if err := c.Update(ctx, next); err != nil {
		return false, fmt.Errorf("inputs: record the applied exports on Secret %s/%s: %w", key.Namespace, key.Name, err)
	}
	return true, nil
}

func setOrDelete(m map[string]string, key, value string) {
	if value == "" {
		delete(m, key)
		return
	}
	m[key] = value
}
