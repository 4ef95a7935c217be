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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	tfjson "github.com/hashicorp/terraform-json"
	corev1 "k8s.io/api/core/v1"

	"github.com/capx-io/capx/internal/captf/chunked"
	"github.com/capx-io/capx/internal/captf/planhash"
	"github.com/capx-io/capx/internal/captf/planview"
)

const (
	// DataKey holds a chunk of the gzip-compressed bundle.
	DataKey = "plan.json.gz"
	// Label marks every Secret of a saved plan.
	Label = "captf.io/saved-plan"
	// PlanAnnotation names the TerraformPlan the saved plan belongs to.
	PlanAnnotation = chunked.PlanAnnotation
	// ChunksAnnotation on the first Secret is the number of Secrets (1 to MaxChunks).
	ChunksAnnotation = "captf.io/saved-plan-chunks"
	// DigestAnnotation on the first Secret is the hex SHA-256 of the whole compressed bundle.
	DigestAnnotation = "captf.io/saved-plan-digest"

	// MaxChunkBytes is the data of one Secret, well under the API server's 1 MiB object limit.
	MaxChunkBytes = 512 << 10
	// MaxChunks bounds the Secrets of one saved plan (8 MiB compressed).
	MaxChunks = 16
	// MaxBundleBytes bounds the bundle (plan file and document, before compression) Encode
	// writes and Decode accepts: the manager decodes and hashes it, and no namespace may cost the
	// shared manager unbounded memory.
	MaxBundleBytes = 8 << 20
)

// ErrCorrupt is returned by Decode for Secrets that do not hold a complete saved plan.
var ErrCorrupt = chunked.ErrCorrupt

// ErrTooLarge is returned by Encode for a bundle that does not fit MaxChunks Secrets.
var ErrTooLarge = errors.New("saved plan too large")

// Bundle is a saved plan: the plan file and its `show -json` document.
type Bundle struct {
	// PlanFile is the file `plan -out` wrote.
	PlanFile []byte `json:"planFile"`
	// Plan is `show -json` of PlanFile, cut to its Document.
	Plan json.RawMessage `json:"plan"`
}

// PlanFileDigest is the hex SHA-256 of the plan file, which the plan hash binds.
func (b *Bundle) PlanFileDigest() string {
	sum := sha256.Sum256(b.PlanFile)
	return hex.EncodeToString(sum[:])
}

// Document is the part of a plan's `show -json` a saved plan keeps: what the plan hash, the
// destructive check and the summary read (the variables, the resource and output changes), not
// the planned values, prior state or configuration, which OpenTofu keeps in the plan file.
func Document(plan *tfjson.Plan) ([]byte, error) {
	return json.Marshal(&tfjson.Plan{
		FormatVersion: plan.FormatVersion, TerraformVersion: plan.TerraformVersion, Variables: plan.Variables,
		ResourceChanges: plan.ResourceChanges, OutputChanges: plan.OutputChanges,
	})
}

// ParsePlan parses the bundle's plan document.
func (b *Bundle) ParsePlan() (*tfjson.Plan, error) { return planhash.Parse(b.Plan) }

// Hash is the plan hash of the saved plan (planhash.Fingerprint) whose document parsed as plan:
// its changes, keyed, bound to the state its plan file was made against (the prior state
// OpenTofu checks before applying the file), the inputs hash of the Job that made it, the plan
// file itself and the digest of the view approvers read ("" for none).
func (b *Bundle) Hash(key []byte, plan *tfjson.Plan, inputsHash, view string) (string, error) {
	prior, err := PriorState(b.PlanFile)
	if err != nil {
		return "", err
	}
	return planhash.Fingerprint(key, plan, planhash.Binding{
		Lineage: prior.Lineage, Serial: prior.Serial, InputsHash: inputsHash, PlanFile: b.PlanFileDigest(), View: view,
	})
}

// PlanName is the TerraformPlan the manager records from the plan Job job of object target
// made: a Job makes at most one plan, so the pair names the plan, its saved plan and its view
// before anyone knows its hash (which only the manager computes).
func PlanName(target, job string) string { return planview.PlanName(target, job, "") }

func format(chunkBytes, maxChunks int) chunked.Format {
	return chunked.Format{Prefix: "captf-savedplan-", DataKey: DataKey, Label: Label,
		ChunksAnnotation: ChunksAnnotation, DigestAnnotation: DigestAnnotation, ChunkBytes: chunkBytes, MaxChunks: maxChunks}
}

var saved = format(MaxChunkBytes, MaxChunks)

// SecretName is the name of the first Secret of TerraformPlan plan's saved plan; the others are
// <name>-part-<i>.
func SecretName(plan string) string { return saved.SecretName(plan) }

// ChunkName is the name of chunk i (0 is the first Secret).
func ChunkName(plan string, i int) string { return saved.ChunkName(plan, i) }

// Encode returns the Secrets holding b for TerraformPlan plan in namespace, each with labels
// (plus Label) and no owner; the caller sets owners.
func Encode(b *Bundle, plan, namespace string, labels map[string]string) ([]*corev1.Secret, error) {
	return encode(b, plan, namespace, labels, MaxChunkBytes, MaxChunks)
}

func encode(b *Bundle, plan, namespace string, labels map[string]string, chunkBytes, maxChunks int) ([]*corev1.Secret, error) {
	raw, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("savedplan: encode: %w", err)
	}
	if len(raw) > MaxBundleBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(raw), MaxBundleBytes)
	}
	data, err := chunked.Gzip(func(w io.Writer) error { _, err := w.Write(raw); return err })
	if err != nil {
		return nil, fmt.Errorf("savedplan: encode: %w", err)
	}
	f := format(chunkBytes, maxChunks)
	if !f.Fits(data) {
		return nil, fmt.Errorf("%w: %d bytes compressed, at most %d fit %d Secrets", ErrTooLarge, len(data), maxChunks*chunkBytes, maxChunks)
	}
	return f.Split(data, plan, namespace, labels)
}

// Chunks returns how many Secrets the saved plan whose first Secret is first has, validated.
func Chunks(first *corev1.Secret) (int, error) {
	n, err := saved.Chunks(first)
	if err != nil {
		return 0, fmt.Errorf("saved plan %w", err)
	}
	return n, nil
}

// Decode reads TerraformPlan plan's saved plan from its Secrets in chunk order (first, then
// part-1...). It checks names, the plan annotation, the chunk count, sizes and the digest, and
// returns the bundle with the digest of its compressed data.
func Decode(plan string, secrets []*corev1.Secret) (*Bundle, string, error) {
	data, err := saved.Join(plan, secrets)
	if err != nil {
		return nil, "", fmt.Errorf("saved plan %w", err)
	}
	b, err := decode(data)
	if err != nil {
		return nil, "", err
	}
	return b, secrets[0].Annotations[DigestAnnotation], nil
}

// DecodeChunks decodes the data of a saved plan's chunks in order (as a Job finds them projected
// into files) and returns the bundle with the hex SHA-256 of the data; the caller compares it with
// the digest it trusts.
func DecodeChunks(chunks [][]byte) (*Bundle, string, error) {
	data, digest, err := saved.Concat(chunks)
	if err != nil {
		return nil, "", fmt.Errorf("saved plan %w", err)
	}
	b, err := decode(data)
	return b, digest, err
}

func decode(data []byte) (*Bundle, error) {
	raw, err := chunked.Gunzip(data, MaxBundleBytes)
	if err != nil {
		return nil, fmt.Errorf("saved plan %w", err)
	}
	b := &Bundle{}
	if err := json.Unmarshal(raw, b); err != nil {
		return nil, fmt.Errorf("saved plan %w: %v", ErrCorrupt, err)
	}
	if len(b.PlanFile) == 0 || len(b.Plan) == 0 {
		return nil, fmt.Errorf("saved plan %w: no plan file or no plan document", ErrCorrupt)
	}
	return b, nil
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
