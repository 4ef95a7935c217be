package planview

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// DataKey holds a chunk of the gzip-compressed view JSON.
	DataKey = "view.json.gz"
	// Label marks every Secret of a plan view.
	Label = "captf.io/plan-view"
	// ChunksAnnotation on the first Secret is the number of Secrets (1 to MaxChunks).
	ChunksAnnotation = "captf.io/plan-view-chunks"
	// PlanAnnotation names the TerraformPlan the view belongs to.
	PlanAnnotation = "captf.io/plan"
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
var ErrCorrupt = errors.New("plan view corrupt")

// SecretName is the name of the first Secret of the view of TerraformPlan plan; the others are
// <name>-part-<i>.
func SecretName(plan string) string {
	sum := sha256.Sum256([]byte(plan))
	return "captf-planview-" + hex.EncodeToString(sum[:])[:20]
}

// ChunkName is the name of chunk i (0 is the first Secret).
func ChunkName(plan string, i int) string {
	if i == 0 {
		return SecretName(plan)
	}
	return SecretName(plan) + "-part-" + strconv.Itoa(i)
}

// Encode returns the Secrets holding v for TerraformPlan plan in namespace, each with labels
// (plus Label) and no owner; the caller sets owners. A view too large for MaxChunks Secrets is
// cut: first every attribute detail, then trailing changes (the order keeps deletes and replaces),
// with Truncated set.
func Encode(v *View, plan, namespace string, labels map[string]string) ([]*corev1.Secret, error) {
	return encode(v, plan, namespace, labels, MaxChunkBytes, MaxChunks)
}

func encode(v *View, plan, namespace string, labels map[string]string, chunkBytes, maxChunks int) ([]*corev1.Secret, error) {
	data, err := compress(v)
	if err != nil {
		return nil, err
	}
	if len(data) > maxChunks*chunkBytes {
		cut := *v
		cut.Truncated = true
		cut.Changes = make([]ResourceChange, len(v.Changes))
		for i, c := range v.Changes {
			c.Attributes, c.AttributesOmitted = nil, len(c.Attributes) > 0 || c.AttributesOmitted
			cut.Changes[i] = c
		}
		for data, err = compress(&cut); err == nil && len(data) > maxChunks*chunkBytes && len(cut.Changes) > 0; data, err = compress(&cut) {
			cut.Changes = cut.Changes[:len(cut.Changes)*3/4]
		}
		if err != nil {
			return nil, err
		}
	}
	sum := sha256.Sum256(data)
	n := (len(data) + chunkBytes - 1) / chunkBytes
	if n == 0 {
		n = 1
	}
	out := make([]*corev1.Secret, n)
	for i := range n {
		end := min((i+1)*chunkBytes, len(data))
		l := map[string]string{Label: "true"}
		for k, val := range labels {
			l[k] = val
		}
		s := &corev1.Secret{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{
				Name: ChunkName(plan, i), Namespace: namespace, Labels: l,
				Annotations: map[string]string{PlanAnnotation: plan},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{DataKey: data[i*chunkBytes : end]},
		}
		if i == 0 {
			s.Annotations[ChunksAnnotation] = strconv.Itoa(n)
			s.Annotations[DigestAnnotation] = hex.EncodeToString(sum[:])
		}
		out[i] = s
	}
	return out, nil
}

func compress(v *View) ([]byte, error) {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	if err := json.NewEncoder(zw).Encode(v); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Chunks returns how many Secrets the view whose first Secret is first has, validated.
func Chunks(first *corev1.Secret) (int, error) {
	n, err := strconv.Atoi(first.Annotations[ChunksAnnotation])
	if err != nil || n < 1 || n > MaxChunks {
		return 0, fmt.Errorf("%w: Secret %s has %s=%q, want 1 to %d", ErrCorrupt, first.Name, ChunksAnnotation, first.Annotations[ChunksAnnotation], MaxChunks)
	}
	return n, nil
}

// Decode reads the view of TerraformPlan plan from its Secrets in chunk order (first, then
// part-1...). It checks names, the plan annotation, the chunk count, sizes, the digest and the
// format version.
func Decode(plan string, secrets []*corev1.Secret) (*View, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w: no Secrets", ErrCorrupt)
	}
	n, err := Chunks(secrets[0])
	if err != nil {
		return nil, err
	}
	if len(secrets) != n {
		return nil, fmt.Errorf("%w: %d of %d Secrets", ErrCorrupt, len(secrets), n)
	}
	var data []byte
	for i, s := range secrets {
		if s == nil || s.Name != ChunkName(plan, i) || s.Annotations[PlanAnnotation] != plan {
			return nil, fmt.Errorf("%w: chunk %d is not %s of plan %s", ErrCorrupt, i, ChunkName(plan, i), plan)
		}
		d := s.Data[DataKey]
		if len(d) > MaxChunkBytes || len(d) == 0 {
			return nil, fmt.Errorf("%w: chunk %s holds %d bytes", ErrCorrupt, s.Name, len(d))
		}
		data = append(data, d...)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != secrets[0].Annotations[DigestAnnotation] {
		return nil, fmt.Errorf("%w: digest does not match (a chunk was changed or is from another write)", ErrCorrupt)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	zr.Multistream(false)
	raw, err := io.ReadAll(io.LimitReader(zr, MaxViewBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if len(raw) > MaxViewBytes {
		return nil, fmt.Errorf("%w: more than %d bytes decompressed", ErrCorrupt, MaxViewBytes)
	}
	v := &View{}
	if err := json.Unmarshal(raw, v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if v.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("%w: format version %d, this build reads %d (use a plugin of the manager's version)", ErrCorrupt, v.FormatVersion, FormatVersion)
	}
	return v, nil
}
