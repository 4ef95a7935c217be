package controllers

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/inputs"
	"github.com/capx-io/capx/internal/captf/jobs"
)

// planKeyName is the object's plan key Secret: captf-plankey-<kindshort>-<name>.
func planKeyName(o jobs.Owner) string {
	return inputs.BoundedName("captf-plankey-" + contract.KindShort(o.Kind) + "-" + o.Name)
}

// ensurePlanKey creates the object's plan key on first need: 32 random bytes that key its plan
// hashes, so an approval names a plan that cannot be matched by accident. It is never rotated
// (rotation would invalidate every waiting approval), moves with the object, and goes with it.
// The module's own process can read it: it guards against drift, not against the module.
func (r *provider[T]) ensurePlanKey(ctx context.Context, p *pass[T]) (string, error) {
	name := planKeyName(p.owner)
	s := &corev1.Secret{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: p.owner.Namespace, Name: name}, s)
	if err == nil {
		return name, nil
	}
	if !apierrors.IsNotFound(err) {
		return "", err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	ref := p.owner.ControllerRef()
	ref.BlockOwnerDeletion = nil
	s = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.owner.Namespace, Name: name, Labels: p.owner.MoveLabels(),
			OwnerReferences: []metav1.OwnerReference{ref},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"key": key},
	}
	if err := r.client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create plan key Secret %s: %w", name, err)
	}
	return name, nil
}
