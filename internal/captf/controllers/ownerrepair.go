package controllers

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/state"
)

// repairKept re-owns what the object keeps besides its state and durable inputs: the state
// backups and the plan key. After a management cluster is restored from a backup they name the
// object's earlier UID; the garbage collector may not delete them meanwhile
// (config/admission/captf-state-protection.yaml), and this gives them back to the object.
func (r *provider[T]) repairKept(ctx context.Context, p *pass[T]) error {
	ref, err := state.OwnerReference(p.scope.Object, r.client.Scheme())
	if err != nil {
		return err
	}
	n, err := state.AdoptBackups(ctx, r.client, p.owner.Namespace, p.owner.StateSuffix(), ref)
	if err != nil {
		return err
	}
	if n > 0 {
		ctrl.LoggerFrom(ctx).Info("Re-owned state backups naming an earlier object", "secrets", n)
	}
	return r.repairPlanKey(ctx, p)
}

// repairPlanKey makes the object the controller of its plan key again when the key names an
// earlier object of the same kind and name (or no owner). A key controlled by anything else is
// left alone. It writes nothing when the reference is right. It reads and patches the key's
// metadata only (the manager's Secret cache holds no data), never the key itself.
func (r *provider[T]) repairPlanKey(ctx context.Context, p *pass[T]) error {
	s := &metav1.PartialObjectMetadata{}
	s.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := r.client.Get(ctx, client.ObjectKey{Namespace: p.owner.Namespace, Name: planKeyName(p.owner)}, s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	want := p.owner.ControllerRef()
	want.BlockOwnerDeletion = nil // as ensurePlanKey creates it
	refs := make([]metav1.OwnerReference, 0, len(s.OwnerReferences)+1)
	for _, ref := range s.OwnerReferences {
		switch {
		case p.owner.IsOwnedBy(ref):
			continue
		case ptr.Deref(ref.Controller, false):
			return nil // another controller's: not ours to take
		}
		refs = append(refs, ref)
	}
	refs = append(refs, want)
	if slices.EqualFunc(refs, s.OwnerReferences, func(a, b metav1.OwnerReference) bool {
		return a.UID == b.UID && a.Kind == b.Kind && a.Name == b.Name && a.APIVersion == b.APIVersion &&
			ptr.Equal(a.Controller, b.Controller) && ptr.Equal(a.BlockOwnerDeletion, b.BlockOwnerDeletion)
	}) {
		return nil
	}
	before := s.DeepCopy()
	s.OwnerReferences = refs
	if err := r.client.Patch(ctx, s, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("re-own plan key Secret %s: %w", s.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Re-owned the plan key naming an earlier object", "secret", s.Name)
	return nil
}
