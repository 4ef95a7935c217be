package inputs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/jobs"
)

// maxNameLength is the longest object name the API server accepts for a Secret.
const maxNameLength = 253

// SecretName is the durable inputs Secret of an owner: captf-inputs-<kindshort>-<name>. A name
// that would pass 253 characters is cut and ends in 16 hex characters of the full name's
// sha256, so it stays unique.
func SecretName(o jobs.Owner) string {
	return BoundedName("captf-inputs-" + contract.KindShort(o.Kind) + "-" + o.Name)
}

// BoundedName returns name when it is a valid length for most objects (253 characters), else
// name cut to fit with 16 hex characters of the full name's sha256 appended, so that two long
// names with a common start stay different.
func BoundedName(name string) string {
	if len(name) <= maxNameLength {
		return name
	}
	full := sha256.Sum256([]byte(name))
	sum := hex.EncodeToString(full[:])[:16]
	// A name must end in an alphanumeric; cutting could leave a '-' or '.' before the suffix.
	return strings.TrimRight(name[:maxNameLength-len(sum)-1], "-.") + "-" + sum
}

// Secret is the durable inputs Secret of an owner: the inputs of the newest apply (or of the
// apply about to start), kept for as long as the object lives. Destroy always renders from it,
// so a destroy runs with the inputs the infrastructure was applied with, even when the objects
// they were read from are already gone. It carries clusterctl's move label and a controller
// reference to the object, so it moves and is collected with it, and the inputs hash.
func Secret(o jobs.Owner, r *Rendered) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       o.Namespace,
			Name:            SecretName(o),
			Labels:          o.MoveLabels(),
			Annotations:     map[string]string{captfv1.InputsHashAnnotation: r.Hash},
			OwnerReferences: []metav1.OwnerReference{o.ControllerRef()},
		},
		Type: corev1.SecretTypeOpaque,
		Data: r.Data(),
	}
}

// Ensure writes the durable inputs Secret of r: it creates it, or updates it when its inputs,
// hash, labels or owner differ, and otherwise writes nothing (so a reconcile that changes
// nothing makes no API write). It keeps what others added: the applied marker, other data
// keys, labels and annotations. It returns whether it wrote. c may read from a cache: a stale
// read ends in a conflict or AlreadyExists error, retried on the next reconcile.
func Ensure(ctx context.Context, c client.Client, o jobs.Owner, r *Rendered) (bool, error) {
	return ensure(ctx, c, Secret(o, r), func(s *corev1.Secret) error { return setOwner(&s.ObjectMeta, o) })
}

// EnsureApply is Ensure for an apply about to start with r: a pool's record of applied exports
// also goes pending when r carries other exports than the record (see ExportsRecord), whether
// or not the stored inputs change (an approved apply runs with the inputs its blocked apply
// already stored).
func EnsureApply(ctx context.Context, c client.Client, o jobs.Owner, r *Rendered) (bool, error) {
	return ensure(ctx, c, Secret(o, r), func(s *corev1.Secret) error {
		markPending(s, o, r)
		return setOwner(&s.ObjectMeta, o)
	})
}

// RunSecret is the per-run Secret of a Job: the same two files, mounted read-only at
// contract.ConfigDir. It is owned by the Job (not the CAPTF object), so the garbage collector
// removes it together with the Job when history pruning deletes that.
func RunSecret(job *batchv1.Job, r *Rendered) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   job.Namespace,
			Name:        jobs.RunSecretName(job.Name),
			Labels:      maps.Clone(job.Labels),
			Annotations: map[string]string{captfv1.InputsHashAnnotation: r.Hash},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job", Name: job.Name, UID: job.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: r.Data(),
	}
}

// EnsureRun writes the per-run Secret of a created Job (it needs the Job's UID, so it is
// written after the Job; the Pod waits for its volume meanwhile). Like Ensure it writes only
// what differs, so a pass that crashed after creating the Job can simply call it again.
func EnsureRun(ctx context.Context, c client.Client, job *batchv1.Job, r *Rendered) (bool, error) {
	want := RunSecret(job, r)
	return ensure(ctx, c, want, func(s *corev1.Secret) error {
		m := &s.ObjectMeta
		if len(m.OwnerReferences) != 1 || m.OwnerReferences[0].UID != job.UID {
			return fmt.Errorf("inputs: Secret %s/%s exists and is not owned by Job %s (uid %s)", m.Namespace, m.Name, job.Name, job.UID)
		}
		return nil
	})
}

// ensure creates want, or updates the existing Secret of its name with want's data keys,
// labels and annotations (keeping everything else) when they differ. adopt fixes the existing
// Secret's owner references (and annotations of its own), or refuses to touch it.
func ensure(ctx context.Context, c client.Client, want *corev1.Secret, adopt func(*corev1.Secret) error) (bool, error) {
	have := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKeyFromObject(want), have)
	if apierrors.IsNotFound(err) {
		if err := c.Create(ctx, want); err != nil {
			return false, fmt.Errorf("inputs: create Secret %s/%s: %w", want.Namespace, want.Name, err)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("inputs: read Secret %s/%s: %w", want.Namespace, want.Name, err)
	}
	next := have.DeepCopy()
	if err := adopt(next); err != nil {
		return false, err
	}
	if next.Labels == nil {
		next.Labels = map[string]string{}
	}
	maps.Copy(next.Labels, want.Labels)
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	maps.Copy(next.Annotations, want.Annotations)
	if next.Data == nil {
		next.Data = map[string][]byte{}
	}
	maps.Copy(next.Data, want.Data)
	if equalMeta(have, next) && maps.EqualFunc(have.Data, next.Data, bytes.Equal) {
		return false, nil
	}
	// Update, not patch: the read resourceVersion guards against overwriting a concurrent write.
	if err := c.Update(ctx, next); err != nil {
		return false, fmt.Errorf("inputs: update Secret %s/%s: %w", want.Namespace, want.Name, err)
	}
	return true, nil
}

func equalMeta(a, b *corev1.Secret) bool {
	return maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations) &&
		len(a.OwnerReferences) == len(b.OwnerReferences) && ownerRefsEqual(a.OwnerReferences, b.OwnerReferences)
}

func ownerRefsEqual(a, b []metav1.OwnerReference) bool {
	for i := range a {
		if a[i].UID != b[i].UID || a[i].Name != b[i].Name || a[i].Kind != b[i].Kind || a[i].APIVersion != b[i].APIVersion ||
			!ptr.Equal(a[i].Controller, b[i].Controller) || !ptr.Equal(a[i].BlockOwnerDeletion, b[i].BlockOwnerDeletion) {
			return false
		}
	}
	return true
}

// setOwner makes o the Secret's controller. A reference to an earlier object of o's kind and
// name (a different UID, as after a management cluster was restored from a backup) is
// replaced; a Secret controlled by anything else is refused, never taken over.
func setOwner(m *metav1.ObjectMeta, o jobs.Owner) error {
	want := o.ControllerRef()
	refs := make([]metav1.OwnerReference, 0, len(m.OwnerReferences)+1)
	for _, ref := range m.OwnerReferences {
		switch {
		case o.IsOwnedBy(ref):
			continue
		case ptr.Deref(ref.Controller, false):
			return fmt.Errorf("inputs: Secret %s/%s is controlled by %s %s, not by %s %s", m.Namespace, m.Name, ref.Kind, ref.Name, o.Kind, o.Name)
		}
		refs = append(refs, ref)
	}
	m.OwnerReferences = append(refs, want)
	return nil
}

// Stored is the durable inputs Secret read back.
type Stored struct {
	// Rendered holds the stored files and their hashes, recomputed from the files.
	*Rendered
	// Applied is true once an apply of these (or earlier) inputs succeeded: the "ever applied"
	// marker that, unlike status, survives clusterctl move.
	Applied bool
	// Exports is a pool's record of the cluster exports it last applied successfully.
	Exports ExportsRecord
}

// Read returns the owner's durable inputs Secret, for a destroy (which always runs with the
// stored inputs) and for the applied marker. c should read live when the answer decides
// whether infrastructure may exist. A missing Secret is an apierrors NotFound error.
func Read(ctx context.Context, c client.Reader, o jobs.Owner) (*Stored, error) {
	role, err := contract.RoleOf(o.Kind)
	if err != nil {
		return nil, fmt.Errorf("inputs: read inputs: %w", err)
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: SecretName(o)}, s); err != nil {
		return nil, fmt.Errorf("inputs: read Secret %s/%s: %w", o.Namespace, SecretName(o), err)
	}
	r := &Rendered{MainTF: s.Data[contract.RootModuleFile], TFVars: s.Data[contract.VarsFile]}
	if len(r.MainTF) == 0 || len(r.TFVars) == 0 {
		return nil, fmt.Errorf("inputs: read Secret %s/%s: it lacks %s or %s", s.Namespace, s.Name, contract.RootModuleFile, contract.VarsFile)
	}
	if r.Hash, err = Hash(role, r.TFVars); err != nil {
		return nil, fmt.Errorf("inputs: read Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return &Stored{Rendered: r, Applied: s.Annotations[captfv1.AppliedAnnotation] == "true", Exports: exportsRecordOf(s)}, nil
}

// MarkApplied sets the applied marker on the owner's durable inputs Secret after a successful
// apply or restore. It writes nothing when the marker is already there.
func MarkApplied(ctx context.Context, c client.Client, o jobs.Owner) (bool, error) {
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: o.Namespace, Name: SecretName(o)}
	if err := c.Get(ctx, key, s); err != nil {
		return false, fmt.Errorf("inputs: read Secret %s/%s: %w", key.Namespace, key.Name, err)
	}
	if s.Annotations[captfv1.AppliedAnnotation] == "true" {
		return false, nil
	}
	patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[captfv1.AppliedAnnotation] = "true"
	if err := c.Patch(ctx, s, patch); err != nil {
		return false, fmt.Errorf("inputs: mark Secret %s/%s applied: %w", key.Namespace, key.Name, err)
	}
	return true, nil
}
