package state

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/statekey"
)

// Selector is the kubernetes backend's own label selector for the Secrets of a suffix.
func Selector(suffix string) client.MatchingLabels {
	return client.MatchingLabels{contract.BackendStateLabel: "true", contract.BackendSuffixLabel: suffix}
}

// Read lists the state Secrets of suffix in namespace by the backend's selector and decodes
// them (see Decode). The reader must see Secrets that lack the manager's captf.io/managed label:
// the backend writes them, so a cache restricted to managed objects would miss them.
func Read(ctx context.Context, c client.Reader, namespace, suffix string) (*Snapshot, error) {
	return ReadWith(ctx, c, namespace, suffix, nil)
}

// ReadWith is Read that also reads a state encrypted with master's key for it (DecodeWith).
func ReadWith(ctx context.Context, c client.Reader, namespace, suffix string, master *statekey.Master) (*Snapshot, error) {
	var list corev1.SecretList
	if err := c.List(ctx, &list, client.InNamespace(namespace), Selector(suffix)); err != nil {
		return nil, fmt.Errorf("state: list Secrets of %s in namespace %s: %w", contract.StateSecretName(suffix), namespace, err)
	}
	return DecodeWith(list.Items, suffix, master)
}

// LockInfo is the backend's lock record (the JSON of app.terraform.io/lock-info, OpenTofu's
// statemgr.LockInfo).
type LockInfo struct {
	// ID is the lock ID that `tofu force-unlock` takes.
	ID string `json:"ID"`
	// Operation is the command that holds the lock (e.g. "OperationTypeApply").
	Operation string `json:"Operation"`
	// Info is extra text from the holder.
	Info string `json:"Info"`
	// Who is "<user>@<hostname>" of the holder; for a runner pod the hostname is the pod name.
	Who string `json:"Who"`
	// Version is the OpenTofu or Terraform version of the holder.
	Version string `json:"Version"`
	// Created is when the lock was taken.
	Created time.Time `json:"Created"`
	// Path is the state's path as the backend names it (empty for the kubernetes backend).
	Path string `json:"Path"`
}

// Lock is what the state's lock Lease says. Judging whether a holder is stale is the caller's
// business; Lock only reports.
type Lock struct {
	// Lease is the lock Lease's name.
	Lease string
	// Exists is false when the backend never locked this state (or its Lease was deleted).
	Exists bool
	// ResourceVersion of the Lease; it changes with every lock and unlock.
	ResourceVersion string
	// Holder is the Lease's holderIdentity: the lock ID while locked, "" when unlocked.
	Holder string
	// Info is the decoded lock record; nil when unlocked or unreadable.
	Info *LockInfo
	// InfoUnreadable is true when the Lease has a lock-info annotation that does not decode: a
	// holder that cannot be identified must be treated as foreign.
	InfoUnreadable bool
}

// Locked reports whether someone holds the lock. The backend sets holderIdentity and the
// annotation together and clears both on unlock; either one means held.
func (l Lock) Locked() bool { return l.Holder != "" || l.Info != nil || l.InfoUnreadable }

// ReadLock reads the lock Lease of suffix. A missing Lease is no error: Exists is false.
func ReadLock(ctx context.Context, c client.Reader, namespace, suffix string) (Lock, error) {
	l := Lock{Lease: contract.LockLeaseName(suffix)}
	var lease coordinationv1.Lease
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: l.Lease}, &lease); err != nil {
		if apierrors.IsNotFound(err) {
			return l, nil
		}
		return l, fmt.Errorf("state: get lock Lease %s in namespace %s: %w", l.Lease, namespace, err)
	}
	return decodeLock(&lease), nil
}

func decodeLock(lease *coordinationv1.Lease) Lock {
	l := Lock{Lease: lease.Name, Exists: true, ResourceVersion: lease.ResourceVersion}
	if lease.Spec.HolderIdentity != nil {
		l.Holder = *lease.Spec.HolderIdentity
	}
	raw, ok := lease.Annotations[contract.LockInfoAnnotation]
	if !ok || raw == "" {
		return l
	}
	var info LockInfo
	if err := json.Unmarshal([]byte(raw), &info); err != nil || info.ID == "" {
		l.InfoUnreadable = true
		return l
	}
	l.Info = &info
	return l
}

// listChunkMeta lists the metadata of the state Secrets of suffix whose names are chunks of
// it. Secrets that only carry the labels are left alone: they are not ours to change.
func listChunkMeta(ctx context.Context, c client.Reader, namespace, suffix string) ([]metav1.PartialObjectMetadata, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := c.List(ctx, list, client.InNamespace(namespace), Selector(suffix)); err != nil {
		return nil, fmt.Errorf("state: list Secrets of %s in namespace %s: %w", contract.StateSecretName(suffix), namespace, err)
	}
	base := contract.StateSecretName(suffix)
	out := list.Items[:0]
	for _, m := range list.Items {
		if _, ok := ChunkIndex(m.Name, base); ok {
			out = append(out, m)
		}
	}
	return out, nil
}
