package state

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// Retain keeps the state of suffix when the object with UID uid is deleted with
// deletionPolicy Retain: the state chunks, the backups and the durable inputs Secret named
// inputsSecret ("" for none) lose their owner references to uid, so the garbage collector leaves
// them, and are labelled captf.io/retained-from-uid=<uid>, so a later object of the same name
// (same suffix) finds them. Idempotent. It lists from live (the API server, not a cache): a
// chunk a cache had not seen yet would keep its owner reference and go with the object.
func Retain(ctx context.Context, c client.Client, live client.Reader, namespace, suffix string, uid types.UID, inputsSecret string) error {
	objs, err := retainable(ctx, live, namespace, suffix, inputsSecret)
	if err != nil {
		return err
	}
	return patchEach(ctx, c, objs, "retain", func(m *metav1.ObjectMeta) bool {
		changed := dropOwner(m, string(uid))
		return setLabel(m, captfv1.RetainedFromUIDLabel, string(uid)) || changed
	})
}

// AdoptRetained is the reverse of Retain for a new object: the same Secrets get owner as their
// one owner of that kind and name (see OwnerReference) and lose the retained-from-uid label.
// Idempotent. It does not record an inputs hash: Adopt does that after the next apply.
func AdoptRetained(ctx context.Context, c client.Client, namespace, suffix string, owner metav1.OwnerReference, inputsSecret string) error {
	objs, err := retainable(ctx, c, namespace, suffix, inputsSecret)
	if err != nil {
		return err
	}
	return patchEach(ctx, c, objs, "adopt retained", func(m *metav1.ObjectMeta) bool {
		changed := ensureOwner(m, owner)
		return removeLabel(m, captfv1.RetainedFromUIDLabel) || changed
	})
}

// retainable lists the metadata of everything Retain and AdoptRetained touch.
func retainable(ctx context.Context, c client.Reader, namespace, suffix, inputsSecret string) ([]metav1.PartialObjectMetadata, error) {
	objs, err := listChunkMeta(ctx, c, namespace, suffix)
	if err != nil {
		return nil, err
	}
	sets, err := Backups(ctx, c, namespace, suffix)
	if err != nil {
		return nil, err
	}
	for _, s := range sets {
		objs = append(objs, s.objs...)
	}
	if inputsSecret == "" {
		return objs, nil
	}
	in := metav1.PartialObjectMetadata{}
	in.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err = c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: inputsSecret}, &in)
	switch {
	case err == nil:
		objs = append(objs, in)
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("state: get inputs Secret %s in namespace %s: %w", inputsSecret, namespace, err)
	}
	return objs, nil
}
