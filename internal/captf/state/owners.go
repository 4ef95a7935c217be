package state

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// AdoptBackups gives the backups of suffix owner as their owner again (see OwnerReference),
// when they name an earlier object of the same kind and name or nothing at all: a management
// cluster restored from a backup gives every object a new UID, and a backup naming the old one
// would be garbage-collected with nothing left to restore from. Backups retained by an earlier
// object (captf.io/retained-from-uid) are left alone: they are not owner's until it adopts them
// (AdoptRetained). Idempotent; it patches only what changed and reports how many it patched.
func AdoptBackups(ctx context.Context, c client.Client, namespace, suffix string, owner metav1.OwnerReference) (int, error) {
	sets, err := Backups(ctx, c, namespace, suffix)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range sets {
		for i := range s.objs {
			if _, retained := s.objs[i].Labels[captfv1.RetainedFromUIDLabel]; retained {
				continue
			}
			patched, err := patchMeta(ctx, c, &s.objs[i], func(m *metav1.ObjectMeta) bool { return ensureOwner(m, owner) })
			if err != nil {
				return n, fmt.Errorf("state: re-own backup Secret %s in namespace %s: %w", s.objs[i].Name, namespace, err)
			}
			if patched {
				n++
			}
		}
	}
	return n, nil
}

// DeleteBackups deletes the backup sets of suffix (not those an earlier object retained), once
// the state they back up is destroyed. The garbage collector does not:
// config/admission/captf-state-protection.yaml refuses it, so that a restored backup still
// naming an earlier owner is not lost before owner repair. It lists them with live, which should
// not be a cache: a backup the cache has not seen yet would be left behind for good. Already
// gone is success.
func DeleteBackups(ctx context.Context, c client.Client, live client.Reader, namespace, suffix string) error {
	sets, err := Backups(ctx, live, namespace, suffix)
	if err != nil {
		return err
	}
	for _, s := range sets {
		for i := range s.objs {
			if _, retained := s.objs[i].Labels[captfv1.RetainedFromUIDLabel]; retained {
				continue // an earlier object's, kept by its deletionPolicy Retain
			}
			if err := deleteMeta(ctx, c, &s.objs[i]); err != nil {
				return fmt.Errorf("state: delete backup Secret %s in namespace %s: %w", s.objs[i].Name, namespace, err)
			}
		}
	}
	return nil
}
