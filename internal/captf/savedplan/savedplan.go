// Package savedplan stores the saved plan of a CAPTF Job (`tofu plan -out`) in Secrets beside its
// TerraformPlan, and reads it back.
//
// A saved plan is what an approval lets apply: the approved apply Job applies exactly this plan
// file (`tofu apply <planfile>`, which OpenTofu refuses once the state has moved on), and the
// manager computes the plan hash from it with a key no Job mounts. The bundle therefore holds
// both the plan file and its `show -json` document (the manager runs no OpenTofu). Both contain
// every input value, sensitive ones too: the Secrets are never logged, never shown by the
// plugins, and owned by the TerraformPlan (the Job writes them owned by the CAPTF object; the
// manager hands them over when it records the plan).
//
// The codec is size-bounded: the bundle is gzip-compressed JSON split into at most MaxChunks
// Secrets of MaxChunkBytes. Unlike a plan view, a plan cannot be cut to fit: Encode refuses a
// bundle that is too large. Decode refuses missing or extra chunks, a wrong digest, oversized
// data and gzip bombs.
package savedplan

import (
	"archive/zip"
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

	"github.com/capx-io/capx/internal/captf/planview"
)

const (
	// DataKey holds a chunk of the gzip-compressed bundle.
	DataKey = "plan.json.gz"
	// Label marks every Secret of a saved plan.
	Label = "captf.io/saved-plan"
	// PlanAnnotation names the TerraformPlan the saved plan belongs to.
	PlanAnnotation = "captf.io/plan"
	// ChunksAnnotation on the first Secret is the number of Secrets (1 to MaxChunks).
	ChunksAnnotation = "captf.io/saved-plan-chunks"
	// DigestAnnotation on the first Secret is the hex SHA-256 of the whole compressed bundle.
	DigestAnnotation = "captf.io/saved-plan-digest"

	// MaxChunkBytes is the data of one Secret, well under the API server's 1 MiB object limit.
	MaxChunkBytes = 512 << 10
	// MaxChunks bounds the Secrets of one saved plan (8 MiB compressed).
	MaxChunks = 16
	// MaxBundleBytes bounds the decompressed bundle Decode accepts.
	MaxBundleBytes = 128 << 20
)

// ErrCorrupt is returned by Decode for Secrets that do not hold a complete saved plan.
var ErrCorrupt = errors.New("saved plan corrupt")

// ErrTooLarge is returned by Encode for a bundle that does not fit MaxChunks Secrets.
var ErrTooLarge = errors.New("saved plan too large")

// Bundle is a saved plan: the plan file and its `show -json` document.
type Bundle struct {
	// PlanFile is the file `plan -out` wrote.
	PlanFile []byte `json:"planFile"`
	// Plan is `show -json` of PlanFile.
	Plan json.RawMessage `json:"plan"`
}

// PlanFileDigest is the hex SHA-256 of the plan file, which the plan hash binds.
func (b *Bundle) PlanFileDigest() string {
	sum := sha256.Sum256(b.PlanFile)
	return hex.EncodeToString(sum[:])
}

// PlanName is the TerraformPlan the manager records from the plan Job job of object target
// made: a Job makes at most one plan, so the pair names the plan, its saved plan and its view
// before anyone knows its hash (which only the manager computes).
func PlanName(target, job string) string { return planview.PlanName(target, job, "") }

// SecretName is the name of the first Secret of TerraformPlan plan's saved plan; the others are
// <name>-part-<i>.
func SecretName(plan string) string {
	sum := sha256.Sum256([]byte(plan))
	return "captf-savedplan-" + hex.EncodeToString(sum[:])[:20]
}

// ChunkName is the name of chunk i (0 is the first Secret).
func ChunkName(plan string, i int) string {
	if i == 0 {
		return SecretName(plan)
	}
	return SecretName(plan) + "-part-" + strconv.Itoa(i)
}

// Encode returns the Secrets holding b for TerraformPlan plan in namespace, each with labels
// (plus Label) and no owner; the caller sets owners.
func Encode(b *Bundle, plan, namespace string, labels map[string]string) ([]*corev1.Secret, error) {
	return encode(b, plan, namespace, labels, MaxChunkBytes, MaxChunks)
}

func encode(b *Bundle, plan, namespace string, labels map[string]string, chunkBytes, maxChunks int) ([]*corev1.Secret, error) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err := json.NewEncoder(zw).Encode(b); err != nil {
		return nil, fmt.Errorf("savedplan: encode: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("savedplan: compress: %w", err)
	}
	data := buf.Bytes()
	if len(data) > maxChunks*chunkBytes {
		return nil, fmt.Errorf("%w: %d bytes compressed, at most %d fit %d Secrets", ErrTooLarge, len(data), maxChunks*chunkBytes, maxChunks)
	}
	sum := sha256.Sum256(data)
	n := max(1, (len(data)+chunkBytes-1)/chunkBytes)
	out := make([]*corev1.Secret, n)
	for i := range n {
		l := map[string]string{Label: "true"}
		for k, v := range labels {
			l[k] = v
		}
		s := &corev1.Secret{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{
				Name: ChunkName(plan, i), Namespace: namespace, Labels: l,
				Annotations: map[string]string{PlanAnnotation: plan},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{DataKey: data[i*chunkBytes : min((i+1)*chunkBytes, len(data))]},
		}
		if i == 0 {
			s.Annotations[ChunksAnnotation] = strconv.Itoa(n)
			s.Annotations[DigestAnnotation] = hex.EncodeToString(sum[:])
		}
		out[i] = s
	}
	return out, nil
}

// Chunks returns how many Secrets the saved plan whose first Secret is first has, validated.
func Chunks(first *corev1.Secret) (int, error) {
	n, err := strconv.Atoi(first.Annotations[ChunksAnnotation])
	if err != nil || n < 1 || n > MaxChunks {
		return 0, fmt.Errorf("%w: Secret %s has %s=%q, want 1 to %d", ErrCorrupt, first.Name, ChunksAnnotation, first.Annotations[ChunksAnnotation], MaxChunks)
	}
	return n, nil
}

// Decode reads TerraformPlan plan's saved plan from its Secrets in chunk order (first, then
// part-1...). It checks names, the plan annotation, the chunk count, sizes and the digest, and
// returns the bundle with the digest of its compressed data.
func Decode(plan string, secrets []*corev1.Secret) (*Bundle, string, error) {
	if len(secrets) == 0 {
		return nil, "", fmt.Errorf("%w: no Secrets", ErrCorrupt)
	}
	n, err := Chunks(secrets[0])
	if err != nil {
		return nil, "", err
	}
	if len(secrets) != n {
		return nil, "", fmt.Errorf("%w: %d of %d Secrets", ErrCorrupt, len(secrets), n)
	}
	var chunks [][]byte
	for i, s := range secrets {
		if s == nil || s.Name != ChunkName(plan, i) || s.Annotations[PlanAnnotation] != plan {
			return nil, "", fmt.Errorf("%w: chunk %d is not %s of plan %s", ErrCorrupt, i, ChunkName(plan, i), plan)
		}
		chunks = append(chunks, s.Data[DataKey])
	}
	b, digest, err := DecodeChunks(chunks)
	if err != nil {
		return nil, "", err
	}
	if digest != secrets[0].Annotations[DigestAnnotation] {
		return nil, "", fmt.Errorf("%w: digest does not match (a chunk was changed or is from another write)", ErrCorrupt)
	}
	return b, digest, nil
}

// DecodeChunks decodes the data of a saved plan's chunks in order (as a Job finds them projected
// into files) and returns the bundle with the hex SHA-256 of the data; the caller compares it with
// the digest it trusts.
func DecodeChunks(chunks [][]byte) (*Bundle, string, error) {
	if len(chunks) == 0 || len(chunks) > MaxChunks {
		return nil, "", fmt.Errorf("%w: %d chunks, want 1 to %d", ErrCorrupt, len(chunks), MaxChunks)
	}
	var data []byte
	for i, d := range chunks {
		if len(d) > MaxChunkBytes || len(d) == 0 {
			return nil, "", fmt.Errorf("%w: chunk %d holds %d bytes", ErrCorrupt, i, len(d))
		}
		data = append(data, d...)
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	zr.Multistream(false)
	raw, err := io.ReadAll(io.LimitReader(zr, MaxBundleBytes+1))
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if len(raw) > MaxBundleBytes {
		return nil, "", fmt.Errorf("%w: more than %d bytes decompressed", ErrCorrupt, MaxBundleBytes)
	}
	b := &Bundle{}
	if err := json.Unmarshal(raw, b); err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if len(b.PlanFile) == 0 || len(b.Plan) == 0 {
		return nil, "", fmt.Errorf("%w: no plan file or no plan document", ErrCorrupt)
	}
	return b, digest, nil
}

// Prior is the state snapshot a plan file was made against: the lineage and serial of the
// "tfstate" member OpenTofu (and Terraform) write into it, which is what `apply <planfile>`
// compares with the backend's current state before it applies anything.
type Prior struct {
	Lineage string `json:"lineage"`
	Serial  int64  `json:"serial"`
}

// maxPriorBytes bounds the prior state read from a plan file.
const maxPriorBytes = 64 << 20

// PriorState reads the prior state's lineage and serial from a plan file.
func PriorState(planFile []byte) (Prior, error) {
	zr, err := zip.NewReader(bytes.NewReader(planFile), int64(len(planFile)))
	if err != nil {
		return Prior{}, fmt.Errorf("savedplan: the plan file is not a plan: %w", err)
	}
	for _, f := range zr.File {
		if f.Name != "tfstate" {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return Prior{}, fmt.Errorf("savedplan: open the plan's prior state: %w", err)
		}
		defer rc.Close()
		raw, err := io.ReadAll(io.LimitReader(rc, maxPriorBytes+1))
		if err != nil {
			return Prior{}, fmt.Errorf("savedplan: read the plan's prior state: %w", err)
		}
		if len(raw) > maxPriorBytes {
			return Prior{}, fmt.Errorf("savedplan: the plan's prior state is larger than %d bytes", maxPriorBytes)
		}
		var p Prior
		if err := json.Unmarshal(raw, &p); err != nil {
			return Prior{}, fmt.Errorf("savedplan: read the plan's prior state: %w", err)
		}
		return p, nil
	}
	return Prior{}, errors.New("savedplan: the plan file holds no prior state (tfstate)")
}
