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

// ensurePlanKey returns the object's plan key, creating it on first need: 32 random bytes that
// key its plan hashes, so an approval names a plan nobody without the key can match. Only the
// manager uses it: it hashes every plan itself, from the saved plan the Job stored, and no Job
// mounts the key (docs/captf/guarded.md says what the runner's account can still read). It is
// never rotated (rotation would invalidate every waiting approval), moves with the object, and
// goes with it.
func (r *provider[T]) ensurePlanKey(ctx context.Context, p *pass[T]) ([]byte, error) {
	name := planKeyName(p.owner)
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: p.owner.Namespace, Name: name}
	err := r.client.Get(ctx, key, s)
	if apierrors.IsNotFound(err) {
		err = r.createPlanKey(ctx, p, name)
		if err == nil || apierrors.IsAlreadyExists(err) {
			err = r.reader.Get(ctx, key, s)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("plan key Secret %s: %w", name, err)
	}
	if len(s.Data["key"]) < 16 {
		return nil, fmt.Errorf("plan key Secret %s holds no key of at least 16 bytes under \"key\"; delete it to have a new one made (every waiting approval is then void)", name)
	}
	return s.Data["key"], nil
}

func (r *provider[T]) createPlanKey(ctx context.Context, p *pass[T], name string) error {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	ref := p.owner.ControllerRef()
	ref.BlockOwnerDeletion = nil
	return r.client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.owner.Namespace, Name: name, Labels: p.owner.MoveLabels(),
			OwnerReferences: []metav1.OwnerReference{ref},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"key": key},
	})
}
