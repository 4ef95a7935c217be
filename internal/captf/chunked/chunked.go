// Package chunked stores one compressed document in up to a bounded number of Secrets, for a
// TerraformPlan: the readable plan view (internal/captf/planview) and the saved plan
// (internal/captf/savedplan). The first Secret, <base>, carries the chunk count and the SHA-256
// of the whole data; the others are <base>-part-<i>. Every Secret names its plan in an annotation.
// Join refuses missing or extra chunks, foreign or oversized ones and a wrong digest; Gunzip
// bounds what the data may decompress to.
package chunked

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PlanAnnotation names the TerraformPlan the Secrets belong to.
const PlanAnnotation = "captf.io/plan"

// ErrCorrupt is returned for Secrets or data that do not hold a complete document.
var ErrCorrupt = errors.New("corrupt")

// Format is one kind of chunked document.
type Format struct {
	// Prefix starts the first Secret's name: <prefix><20 hex of sha256(plan)>.
	Prefix string
	// DataKey holds each chunk's data.
	DataKey string
	// Label marks every Secret of the kind ("true").
	Label string
	// ChunksAnnotation and DigestAnnotation on the first Secret: the number of Secrets and the
	// hex SHA-256 of the whole data.
	ChunksAnnotation, DigestAnnotation string
	// ChunkBytes is the data of one Secret; MaxChunks bounds the Secrets of one document.
	ChunkBytes, MaxChunks int
}

// SecretName is the first Secret of plan's document.
func (f Format) SecretName(plan string) string {
	sum := sha256.Sum256([]byte(plan))
	return f.Prefix + hex.EncodeToString(sum[:])[:20]
}

// ChunkName is the name of chunk i (0 is the first Secret).
func (f Format) ChunkName(plan string, i int) string {
	if i == 0 {
		return f.SecretName(plan)
	}
	return f.SecretName(plan) + "-part-" + strconv.Itoa(i)
}

// Fits reports whether data fits MaxChunks Secrets.
func (f Format) Fits(data []byte) bool { return len(data) <= f.MaxChunks*f.ChunkBytes }

// Split returns the Secrets holding data for plan in namespace, each with labels (plus Label)
// and no owner; the caller sets owners. Data that does not fit is refused.
func (f Format) Split(data []byte, plan, namespace string, labels map[string]string) ([]*corev1.Secret, error) {
	if !f.Fits(data) {
		return nil, fmt.Errorf("%d bytes, at most %d fit %d Secrets", len(data), f.MaxChunks*f.ChunkBytes, f.MaxChunks)
	}
	sum := sha256.Sum256(data)
	n := max(1, (len(data)+f.ChunkBytes-1)/f.ChunkBytes)
	out := make([]*corev1.Secret, n)
	for i := range n {
		l := maps.Clone(labels)
		if l == nil {
			l = map[string]string{}
		}
		l[f.Label] = "true"
		s := &corev1.Secret{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{
				Name: f.ChunkName(plan, i), Namespace: namespace, Labels: l,
				Annotations: map[string]string{PlanAnnotation: plan},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{f.DataKey: data[i*f.ChunkBytes : min((i+1)*f.ChunkBytes, len(data))]},
		}
		if i == 0 {
			s.Annotations[f.ChunksAnnotation] = strconv.Itoa(n)
			s.Annotations[f.DigestAnnotation] = hex.EncodeToString(sum[:])
		}
		out[i] = s
	}
	return out, nil
}

// Chunks returns how many Secrets the document whose first Secret is first has, validated.
func (f Format) Chunks(first *corev1.Secret) (int, error) {
	n, err := strconv.Atoi(first.Annotations[f.ChunksAnnotation])
	if err != nil || n < 1 || n > f.MaxChunks {
		return 0, fmt.Errorf("%w: Secret %s has %s=%q, want 1 to %d", ErrCorrupt, first.Name, f.ChunksAnnotation, first.Annotations[f.ChunksAnnotation], f.MaxChunks)
	}
	return n, nil
}

// Join reads plan's document from its Secrets in chunk order (first, then part-1...): it checks
// names, the plan annotation, the chunk count, sizes and the digest, and returns the data.
func (f Format) Join(plan string, secrets []*corev1.Secret) ([]byte, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w: no Secrets", ErrCorrupt)
	}
	n, err := f.Chunks(secrets[0])
	if err != nil {
		return nil, err
	}
	if len(secrets) != n {
		return nil, fmt.Errorf("%w: %d of %d Secrets", ErrCorrupt, len(secrets), n)
	}
	chunks := make([][]byte, n)
	for i, s := range secrets {
		if s == nil || s.Name != f.ChunkName(plan, i) || s.Annotations[PlanAnnotation] != plan {
			return nil, fmt.Errorf("%w: chunk %d is not %s of plan %s", ErrCorrupt, i, f.ChunkName(plan, i), plan)
		}
		chunks[i] = s.Data[f.DataKey]
	}
	data, digest, err := f.Concat(chunks)
	if err != nil {
		return nil, err
	}
	if digest != secrets[0].Annotations[f.DigestAnnotation] {
		return nil, fmt.Errorf("%w: digest does not match (a chunk was changed or is from another write)", ErrCorrupt)
	}
	return data, nil
}

// Concat joins chunk data in order (as a Job finds it projected into files) and returns it with
// its hex SHA-256; the caller compares that with the digest it trusts.
func (f Format) Concat(chunks [][]byte) ([]byte, string, error) {
	if len(chunks) == 0 || len(chunks) > f.MaxChunks {
		return nil, "", fmt.Errorf("%w: %d chunks, want 1 to %d", ErrCorrupt, len(chunks), f.MaxChunks)
	}
	var data []byte
	for i, d := range chunks {
		if len(d) > f.ChunkBytes || len(d) == 0 {
			return nil, "", fmt.Errorf("%w: chunk %d holds %d bytes", ErrCorrupt, i, len(d))
		}
		data = append(data, d...)
	}
	sum := sha256.Sum256(data)
	return data, hex.EncodeToString(sum[:]), nil
}

// Gzip compresses data (fast: the documents are written once per plan).
func Gzip(write func(io.Writer) error) ([]byte, error) {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	if err := write(zw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Gunzip decompresses one gzip member of at most limit bytes (a gzip bomb is refused).
func Gunzip(data []byte, limit int) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	zr.Multistream(false)
	raw, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if len(raw) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes decompressed", ErrCorrupt, limit)
	}
	return raw, nil
}
