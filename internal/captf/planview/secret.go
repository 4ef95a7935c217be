package planview

import (
	"encoding/json"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"

	"github.com/capx-io/capx/internal/captf/chunked"
)

const (
	// DataKey holds a chunk of the gzip-compressed view JSON.
	DataKey = "view.json.gz"
	// Label marks every Secret of a plan view.
	Label = "captf.io/plan-view"
	// ChunksAnnotation on the first Secret is the number of Secrets (1 to MaxChunks).
	ChunksAnnotation = "captf.io/plan-view-chunks"
	// PlanAnnotation names the TerraformPlan the view belongs to.
	PlanAnnotation = chunked.PlanAnnotation
	// DigestAnnotation on the first Secret is sha256 of the whole compressed view.
	DigestAnnotation = "captf.io/plan-view-digest"

	// MaxChunkBytes is the data of one Secret, well under the API server's 1 MiB object limit.
	MaxChunkBytes = 512 << 10
	// MaxChunks bounds the Secrets of one view (8 MiB compressed).
	MaxChunks = 16
	// MaxViewBytes bounds the decompressed view Decode accepts.
	MaxViewBytes = 64 << 20
)

// ErrCorrupt is returned by Decode for Secrets that do not hold a complete view.
var ErrCorrupt = chunked.ErrCorrupt

// format is how a view is chunked into Secrets.
func format(chunkBytes, maxChunks int) chunked.Format {
	return chunked.Format{Prefix: "captf-planview-", DataKey: DataKey, Label: Label,
		ChunksAnnotation: ChunksAnnotation, DigestAnnotation: DigestAnnotation, ChunkBytes: chunkBytes, MaxChunks: maxChunks}
}

var views = format(MaxChunkBytes, MaxChunks)

// SecretName is the name of the first Secret of the view of TerraformPlan plan; the others are
// <name>-part-<i>.
func SecretName(plan string) string { return views.SecretName(plan) }

// ChunkName is the name of chunk i (0 is the first Secret).
func ChunkName(plan string, i int) string { return views.ChunkName(plan, i) }

// Encode returns the Secrets holding v for TerraformPlan plan in namespace, each with labels
// (plus Label) and no owner; the caller sets owners. A view too large for MaxChunks Secrets is
// cut: first every attribute detail, then trailing changes (the order keeps deletes and replaces),
// with Truncated set.
func Encode(v *View, plan, namespace string, labels map[string]string) ([]*corev1.Secret, error) {
	return encode(v, plan, namespace, labels, MaxChunkBytes, MaxChunks)
}

func encode(v *View, plan, namespace string, labels map[string]string, chunkBytes, maxChunks int) ([]*corev1.Secret, error) {
	f := format(chunkBytes, maxChunks)
	data, err := compress(v)
	if err != nil {
		return nil, err
	}
	if !f.Fits(data) {
		cut := *v
		cut.Truncated = true
		cut.Changes = make([]ResourceChange, len(v.Changes))
		for i, c := range v.Changes {
			c.Attributes, c.AttributesOmitted = nil, len(c.Attributes) > 0 || c.AttributesOmitted
			cut.Changes[i] = c
		}
		for data, err = compress(&cut); err == nil && !f.Fits(data) && len(cut.Changes) > 0; data, err = compress(&cut) {
			cut.Changes = cut.Changes[:len(cut.Changes)*3/4]
		}
		if err != nil {
			return nil, err
		}
	}
	return f.Split(data, plan, namespace, labels)
}

func compress(v *View) ([]byte, error) {
	return chunked.Gzip(func(w io.Writer) error { return json.NewEncoder(w).Encode(v) })
}

// Chunks returns how many Secrets the view whose first Secret is first has, validated.
func Chunks(first *corev1.Secret) (int, error) {
	n, err := views.Chunks(first)
	if err != nil {
		return 0, fmt.Errorf("plan view %w", err)
	}
	return n, nil
}

// Decode reads the view of TerraformPlan plan from its Secrets in chunk order (first, then
// part-1...). It checks names, the plan annotation, the chunk count, sizes, the digest and the
// format version.
func Decode(plan string, secrets []*corev1.Secret) (*View, error) {
	data, err := views.Join(plan, secrets)
	if err == nil {
		data, err = chunked.Gunzip(data, MaxViewBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("plan view %w", err)
	}
	v := &View{}
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("plan view %w: %v", ErrCorrupt, err)
	}
	if v.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("plan view %w: format version %d, this build reads %d (use a plugin of the manager's version)", ErrCorrupt, v.FormatVersion, FormatVersion)
	}
	return v, nil
}
