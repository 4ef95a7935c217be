package state

import (
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
// not seen would be missing from the copy. Chunks the copy has already are kept as they are (a
// pass that stopped half-way finishes the copy). It returns how many chunks the source has.
func Copy(ctx context.Context, c client.Client, live client.Reader, namespace, suffix, toNamespace, toSuffix string,
	labels map[string]string, owner metav1.OwnerReference) (int, error) {
	var list corev1.SecretList
	if err := live.List(ctx, &list, client.InNamespace(namespace), Selector(suffix)); err != nil {
		return 0, fmt.Errorf("state: list Secrets of %s in namespace %s: %w", contract.StateSecretName(suffix), namespace, err)
	}
	base, toBase := contract.StateSecretName(suffix), contract.StateSecretName(toSuffix)
	n := 0
	for i := range list.Items {
		src := &list.Items[i]
		if _, ok := ChunkIndex(src.Name, base); !ok {
			continue // labelled like a chunk but not named like one: not part of the state
		}
		n++
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
		if err := c.Create(ctx, dst); err != nil && !apierrors.IsAlreadyExists(err) {
			return n, fmt.Errorf("state: copy %s/%s to %s/%s: %w", namespace, src.Name, toNamespace, dst.Name, err)
		}
	}
	return n, nil
}
