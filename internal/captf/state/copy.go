package state

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/contract"
)

// Copy copies the state of suffix in namespace to the state of toSuffix in toNamespace: every
// chunk, byte for byte, under the chunk names of toSuffix, with the backend's labels for
// toSuffix, labels (the new owner's) in place of the old owner's, and owner as its one owner
// reference. The copy reads as the same state (lineage, serial, inputs hash). It is the state a
// destroy elsewhere runs on (the source namespace is being deleted and creates nothing), so the
// source is left as it is. It lists the source from live (the API server): a chunk a cache had
// not seen would be missing from the copy.
//
// The copy is exactly the source when Copy returns: a chunk already there is kept only when it
// is one this copy wrote (owner's UID, the source's data); any other Secret of a chunk's name is
// replaced, and chunks the source does not have are deleted. Nothing found in the destination
// is trusted, whoever wrote it. It returns how many chunks the source has.
func Copy(ctx context.Context, c client.Client, live client.Reader, namespace, suffix, toNamespace, toSuffix string,
	labels map[string]string, owner metav1.OwnerReference) (int, error) {
	var list corev1.SecretList
	if err := live.List(ctx, &list, client.InNamespace(namespace), Selector(suffix)); err != nil {
		return 0, fmt.Errorf("state: list Secrets of %s in namespace %s: %w", contract.StateSecretName(suffix), namespace, err)
	}
	base, toBase := contract.StateSecretName(suffix), contract.StateSecretName(toSuffix)
	want := map[string]bool{}
	for i := range list.Items {
		src := &list.Items[i]
		if _, ok := ChunkIndex(src.Name, base); !ok {
			continue // labelled like a chunk but not named like one: not part of the state
		}
		l := maps.Clone(src.Labels)
		for k := range l {
			if strings.HasPrefix(k, "captf.") || strings.Contains(k, "cluster.x-k8s.io/") {
				delete(l, k) // the old owner's and its cluster's; labels brings the new owner's
			}
		}
		maps.Copy(l, labels)
		l[contract.BackendSuffixLabel] = toSuffix
		dst := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: toNamespace, Name: toBase + strings.TrimPrefix(src.Name, base),
				Labels: l, Annotations: maps.Clone(src.Annotations),
				OwnerReferences: []metav1.OwnerReference{owner},
			},
			Type: src.Type, Data: src.Data,
		}
		want[dst.Name] = true
		if err := CreateExact(ctx, c, live, dst); err != nil {
			return len(want), fmt.Errorf("state: copy %s/%s to %s/%s: %w", namespace, src.Name, toNamespace, dst.Name, err)
		}
	}
	var have corev1.SecretList
	if err := live.List(ctx, &have, client.InNamespace(toNamespace), Selector(toSuffix)); err != nil {
		return len(want), fmt.Errorf("state: list Secrets of %s in namespace %s: %w", toBase, toNamespace, err)
	}
	for i := range have.Items {
		if s := &have.Items[i]; !want[s.Name] {
			if err := c.Delete(ctx, s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
				return len(want), fmt.Errorf("state: delete %s/%s, which the source state has no chunk for: %w", toNamespace, s.Name, err)
			}
		}
	}
	return len(want), nil
}

// CreateExact creates want, a Secret whose single owner reference is its owner. A Secret of that
// name already there is kept only when it is exactly want (the same owner, type and data: a
// pass that stopped half-way wrote it); anything else is deleted (by its UID, so a Secret
// re-created meanwhile is judged again on the next call) and want is created in its place.
func CreateExact(ctx context.Context, c client.Client, live client.Reader, want *corev1.Secret) error {
	err := c.Create(ctx, want.DeepCopy())
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	have := &corev1.Secret{}
	if err := live.Get(ctx, client.ObjectKeyFromObject(want), have); err != nil {
		return err
	}
	if sameSecret(have, want) {
		return nil
	}
	if err := c.Delete(ctx, have, client.Preconditions{UID: &have.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("replace Secret %s, which this copy did not write: %w", want.Name, err)
	}
	return c.Create(ctx, want.DeepCopy())
}

func sameSecret(have, want *corev1.Secret) bool {
	if have.Type != want.Type || len(have.OwnerReferences) != 1 || have.OwnerReferences[0].UID != want.OwnerReferences[0].UID ||
		len(have.Data) != len(want.Data) {
		return false
	}
	for k, v := range want.Data {
		if w, ok := have.Data[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}
