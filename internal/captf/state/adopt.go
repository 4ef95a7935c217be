package state

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
)

// OwnerReference returns the owner reference CAPTF puts on state chunks and backups for a
// CAPTF object: neither a controller reference nor blocking owner deletion.
//
// Not a controller reference, because the controller does not reconcile these Secrets towards
// a spec (the backend writes them), a second controller reference could never be added during
// owner repair after a management-cluster restore (a new UID), and clusterctl move and the
// garbage collector follow plain owner references just as well: the state moves with the object
// and is collected with it. No blockOwnerDeletion, because the object's finalizer already holds
// its deletion until destroy and cleanup are done, and setting it would need update rights on
// the owner's finalizers wherever OwnerReferencesPermissionEnforcement is on.
func OwnerReference(obj client.Object, scheme *runtime.Scheme) (metav1.OwnerReference, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return metav1.OwnerReference{}, fmt.Errorf("state: find the kind of owner %s: %w", obj.GetName(), err)
	}
	return metav1.OwnerReference{
		APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: obj.GetName(), UID: obj.GetUID(),
	}, nil
}

// Adopt makes the state of suffix belong to owner after a successful apply or restore: every
// chunk gets exactly one owner reference to owner's current UID (references to an earlier
// object of the same kind and name are dropped), the manager's and clusterctl's labels, and
// the base Secret records inputsHash and the module image that applied it (each skipped when
// empty). It is idempotent and patches only what changed, each patch guarded by the Secret's
// resourceVersion.
func Adopt(ctx context.Context, c client.Client, namespace, suffix string, owner metav1.OwnerReference, inputsHash, image string) error {
	chunks, err := listChunkMeta(ctx, c, namespace, suffix)
	if err != nil {
		return err
	}
	base := contract.StateSecretName(suffix)
	if !hasName(chunks, base) {
		return newError(captfv1.StateNotFoundReason, base,
			fmt.Sprintf("no Secret %s in namespace %s to adopt; the apply did not write a state", base, namespace))
	}
	return patchEach(ctx, c, chunks, "adopt", func(m *metav1.ObjectMeta) bool {
		changed := ensureOwner(m, owner)
		changed = setLabel(m, captfv1.ManagedLabel, "true") || changed
		changed = setLabel(m, clusterctlv1.ClusterctlMoveLabel, "") || changed
		if m.Name == base && inputsHash != "" {
			changed = setAnnotation(m, captfv1.InputsHashAnnotation, inputsHash) || changed
		}
		if m.Name == base && image != "" {
			changed = setAnnotation(m, captfv1.AppliedImageAnnotation, image) || changed
		}
		return changed
	})
}

// Delete deletes the state chunks of suffix and its lock Lease, after a successful destroy.
// Secrets that carry the backend's labels without a chunk name are left alone. Already gone
// is success. It lists from live, so no chunk a cache had not seen yet is left behind.
func Delete(ctx context.Context, c client.Client, live client.Reader, namespace, suffix string) error {
	chunks, err := listChunkMeta(ctx, live, namespace, suffix)
	if err != nil {
		return err
	}
	for i := range chunks {
		if err := deleteMeta(ctx, c, &chunks[i]); err != nil {
			return fmt.Errorf("state: delete Secret %s in namespace %s: %w", chunks[i].Name, namespace, err)
		}
	}
	lease := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: contract.LockLeaseName(suffix)}}
	lease.SetGroupVersionKind(schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"})
	if err := c.Delete(ctx, lease); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("state: delete lock Lease %s in namespace %s: %w", lease.Name, namespace, err)
	}
	return nil
}

// patchMeta applies change to an object's metadata and, if anything changed, merge-patches it
// with the resourceVersion as a precondition. On a conflict (the backend or another reconcile
// wrote in between) it reads the object again and tries once more, applying change afresh.
// It reports whether it patched.
func patchMeta(ctx context.Context, c client.Client, obj *metav1.PartialObjectMetadata, change func(*metav1.ObjectMeta) bool) (bool, error) {
	if obj.GroupVersionKind().Empty() {
		obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	}
	for attempt := 0; ; attempt++ {
		before := obj.DeepCopy()
		if !change(&obj.ObjectMeta) {
			return attempt > 0, nil
		}
		err := c.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			return true, nil
		}
		if !apierrors.IsConflict(err) || attempt > 0 {
			return false, err
		}
		gvk := obj.GroupVersionKind()
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err
		}
		obj.SetGroupVersionKind(gvk)
	}
}

// patchEach applies change to each object with patchMeta; verb names the operation in errors.
func patchEach(ctx context.Context, c client.Client, objs []metav1.PartialObjectMetadata, verb string, change func(*metav1.ObjectMeta) bool) error {
	for i := range objs {
		if _, err := patchMeta(ctx, c, &objs[i], change); err != nil {
			return fmt.Errorf("state: %s Secret %s in namespace %s: %w", verb, objs[i].Name, objs[i].Namespace, err)
		}
	}
	return nil
}

// deleteMeta deletes an object if it still is the one listed (same UID); gone is success.
func deleteMeta(ctx context.Context, c client.Client, obj *metav1.PartialObjectMetadata) error {
	if obj.GroupVersionKind().Empty() {
		obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	}
	var opts []client.DeleteOption
	if obj.UID != "" {
		opts = append(opts, client.Preconditions{UID: &obj.UID})
	}
	err := c.Delete(ctx, obj, opts...)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Conflict: the name now belongs to a new object, which is not the one we meant.
		return nil
	}
	return err
}

// ensureOwner leaves exactly one reference to owner.UID on m, in the form OwnerReference
// returns, and drops references to earlier objects of the same group, kind and name.
func ensureOwner(m *metav1.ObjectMeta, owner metav1.OwnerReference) bool {
	want := metav1.OwnerReference{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID}
	group := groupOf(owner.APIVersion)
	refs := make([]metav1.OwnerReference, 0, len(m.OwnerReferences)+1)
	found, changed := false, false
	for _, r := range m.OwnerReferences {
		switch {
		case r.UID == owner.UID && !found && equalRef(r, want):
			found = true
			refs = append(refs, r)
		case r.UID == owner.UID, groupOf(r.APIVersion) == group && r.Kind == owner.Kind && r.Name == owner.Name:
			changed = true // a duplicate, an outdated form, or an earlier incarnation
		default:
			refs = append(refs, r)
		}
	}
	if !found {
		refs = append(refs, want)
		changed = true
	}
	if changed {
		m.OwnerReferences = refs
	}
	return changed
}

// dropOwner removes every reference to uid from m.
func dropOwner(m *metav1.ObjectMeta, uid string) bool {
	refs := m.OwnerReferences[:0:0]
	for _, r := range m.OwnerReferences {
		if string(r.UID) != uid {
			refs = append(refs, r)
		}
	}
	if len(refs) == len(m.OwnerReferences) {
		return false
	}
	m.OwnerReferences = refs
	return true
}

func equalRef(a, b metav1.OwnerReference) bool {
	return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID &&
		(a.Controller == nil || !*a.Controller) && (a.BlockOwnerDeletion == nil || !*a.BlockOwnerDeletion)
}

func groupOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return apiVersion
	}
	return gv.Group
}

func setLabel(m *metav1.ObjectMeta, key, value string) bool {
	if v, ok := m.Labels[key]; ok && v == value {
		return false
	}
	metav1.SetMetaDataLabel(m, key, value)
	return true
}

func removeLabel(m *metav1.ObjectMeta, key string) bool {
	if _, ok := m.Labels[key]; !ok {
		return false
	}
	delete(m.Labels, key)
	return true
}

func setAnnotation(m *metav1.ObjectMeta, key, value string) bool {
	if v, ok := m.Annotations[key]; ok && v == value {
		return false
	}
	metav1.SetMetaDataAnnotation(m, key, value)
	return true
}

func hasName(objs []metav1.PartialObjectMetadata, name string) bool {
	for _, o := range objs {
		if o.Name == name {
			return true
		}
	}
	return false
}
