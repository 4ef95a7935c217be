package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/planview"
)

// adoptPlanView hands the Secrets holding a plan's readable changes (written by the plan's Job,
// owned by the object until the plan exists) to the TerraformPlan, so they are collected with
// it and move with it. A plan whose Job stored no view has nothing to adopt.
func (r *provider[T]) adoptPlanView(ctx context.Context, tp *captfv1.TerraformPlan) error {
	first := &corev1.Secret{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: tp.Namespace, Name: planview.SecretName(tp.Name)}, first); err != nil {
		return client.IgnoreNotFound(err)
	}
	n, err := planview.Chunks(first)
	if err != nil {
		return nil // not a view the runner wrote; plan show reports it
	}
	names := make([]string, n)
	for i := range n {
		names[i] = planview.ChunkName(tp.Name, i)
	}
	return r.adoptSecrets(ctx, tp, names)
}

// viewDigest is the digest of the readable changes the plan's Job stored, which the plan records
// (annotation planview.DigestAnnotation) so that `kubectl captf plan show` refuses a view
// rewritten since; "" when there is none.
func (r *provider[T]) viewDigest(ctx context.Context, namespace, plan string) (string, error) {
	first := &corev1.Secret{}
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: planview.SecretName(plan)}, first); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	return first.Annotations[planview.DigestAnnotation], nil
}

// adoptSecrets hands the named Secrets of a plan (its view, its saved plan), written by its Job
// and owned by the object until the plan exists, to the TerraformPlan: the plan alone controls
// them, so they go with it, and clusterctl move moves them with it (they carry its move label).
// A Secret that is gone is skipped.
func (r *provider[T]) adoptSecrets(ctx context.Context, tp *captfv1.TerraformPlan, names []string) error {
	ref := metav1.OwnerReference{APIVersion: captfv1.GroupVersion.String(), Kind: "TerraformPlan", Name: tp.Name, UID: tp.UID,
		Controller: ptr.To(true)}
	for _, name := range names {
		s := &corev1.Secret{}
		if err := r.reader.Get(ctx, client.ObjectKey{Namespace: tp.Namespace, Name: name}, s); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if len(s.OwnerReferences) == 1 && s.OwnerReferences[0].UID == tp.UID {
			continue
		}
		patch := client.MergeFrom(s.DeepCopy())
		s.OwnerReferences = []metav1.OwnerReference{ref}
		if err := r.client.Patch(ctx, s, patch); err != nil {
			return fmt.Errorf("hand Secret %s to TerraformPlan %s: %w", s.Name, tp.Name, err)
		}
	}
	return nil
}
