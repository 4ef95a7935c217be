package state

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/contract"
)

// BackupOffsiteAnnotation, on a backup set's first Secret, is where its off-cluster copy is
// (s3://bucket/key): set by the manager once the copy is stored, or by an import from that copy.
const BackupOffsiteAnnotation = "captf.io/state-backup-offsite"

// ChunkBytes is how much compressed state one chunk Secret holds when CAPTF cuts a state
// itself: below the 1 MiB of data a Secret takes, as the backend's own chunks are.
const ChunkBytes = 960 << 10

// Offsite is where the set's off-cluster copy is, "" if it has none (yet).
func (s BackupSet) Offsite() string {
	if len(s.objs) == 0 {
		return ""
	}
	return s.objs[0].Annotations[BackupOffsiteAnnotation]
}

// SetOffsite records location as the set's offsite copy in this listing (RecordOffsite writes
// it to the Secret).
func (s *BackupSet) SetOffsite(location string) {
	if len(s.objs) == 0 {
		return
	}
	if s.objs[0].Annotations == nil {
		s.objs[0].Annotations = map[string]string{}
	}
	s.objs[0].Annotations[BackupOffsiteAnnotation] = location
}

// SnapshotOf decodes compressed state bytes as the state of suffix in namespace, cut into
// chunks of ChunkBytes as the backend would, with labels on the first chunk: what Backup
// takes, for a state that did not come from Secrets (an errored state, an offsite copy).
func SnapshotOf(namespace, suffix string, compressed []byte, labels map[string]string) (*Snapshot, error) {
	base := contract.StateSecretName(suffix)
	var secrets []corev1.Secret
	for i, data := 0, compressed; len(data) > 0; i++ {
		n := min(len(data), ChunkBytes)
		secrets = append(secrets, corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ChunkName(base, i)},
			Data: map[string][]byte{contract.BackendStateKey: data[:n]}})
		data = data[n:]
	}
	if len(secrets) == 0 {
		return nil, fmt.Errorf("state: no state bytes to decode as %s", base)
	}
	secrets[0].Labels = labels
	return Decode(secrets, suffix)
}

// BackupData reads a complete backup set's Secrets live and returns their data concatenated
// (the compressed state), after the same checks VerifyBackup makes of what a restore reads: the
// digest the set records, and a readable state of the set's serial and lineage. It is what an
// offsite copy holds.
func BackupData(ctx context.Context, c client.Reader, namespace string, set BackupSet) ([]byte, error) {
	if err := VerifyBackup(ctx, c, namespace, set, ""); err != nil {
		return nil, err
	}
	var out []byte
	sum := sha256.New()
	for _, name := range set.Chunks {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
			return nil, fmt.Errorf("state: read backup Secret %s in namespace %s: %w", name, namespace, err)
		}
		out = append(out, s.Data[contract.BackendStateKey]...)
		sum.Write(s.Data[contract.BackendStateKey])
	}
	// Read twice: the Secrets are immutable, but may have been deleted and created again since.
	if got := hex.EncodeToString(sum.Sum(nil)); got != set.Digest {
		return nil, fmt.Errorf("state: backup %s changed while it was read (digest %s, not %s): %w", set.Name, got, set.Digest, ErrBackupInvalid)
	}
	return out, nil
}

// RecordOffsite records on the set's first Secret where its off-cluster copy is (a metadata
// patch: the data is immutable).
func RecordOffsite(ctx context.Context, c client.Writer, namespace string, set BackupSet, location string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{BackupOffsiteAnnotation: location}}})
	if err != nil {
		return err
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: set.Name}}
	if err := c.Patch(ctx, s, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("state: record the offsite copy of backup %s in namespace %s: %w", set.Name, namespace, err)
	}
	return nil
}

// Imported describes a state brought back from an offsite copy: what the copy's metadata
// claims, checked against what the bytes decode to.
type Imported struct {
	Serial     int64
	Lineage    string
	Digest     string
	InputsHash string
	// Location is the copy's s3://bucket/key, recorded on the set.
	Location string
	// Labels go on the set's Secrets (the owner's, as on its state).
	Labels map[string]string
}

// ImportBackup writes compressed state bytes, read from an offsite copy, into a backup set of
// suffix in namespace owned by owner, so the restore path (FindBackup, VerifyBackup, the
// restore Job) can restore it like any backup. The bytes must decode to a readable state of the
// serial, lineage and digest the copy claims. The set is taken now, so it is the newest of its
// serial and no pruning removes it before the restore; it keeps up to MaxStatusBackups sets.
// It returns the set's name.
func ImportBackup(ctx context.Context, c client.Client, namespace, suffix string, owner metav1.OwnerReference, in Imported, data []byte, now time.Time) (string, error) {
	snap, err := SnapshotOf(namespace, suffix, data, in.Labels)
	if err != nil {
		return "", fmt.Errorf("state: the offsite copy %s does not decode as a state: %w", in.Location, err)
	}
	switch {
	case snap.Digest != in.Digest:
		return "", fmt.Errorf("state: the offsite copy %s has digest %s, not the %s it records: %w", in.Location, snap.Digest, in.Digest, ErrBackupInvalid)
	case snap.Serial != in.Serial || snap.Lineage != in.Lineage:
		return "", fmt.Errorf("state: the offsite copy %s holds serial %d of lineage %s, but records serial %d of lineage %s: %w",
			in.Location, snap.Serial, snap.Lineage, in.Serial, in.Lineage, ErrBackupInvalid)
	}
	snap.InputsHash = in.InputsHash
	name, err := Backup(ctx, c, snap, owner, BackupOptions{Keep: MaxStatusBackups, Now: now})
	if err != nil {
		return "", err
	}
	sets, err := Backups(ctx, c, namespace, suffix)
	if err != nil {
		return name, err
	}
	for _, s := range sets {
		if s.Name == name {
			return name, RecordOffsite(ctx, c, namespace, s, in.Location)
		}
	}
	return name, fmt.Errorf("state: backup %s of the offsite copy %s is gone right after it was written", name, in.Location)
}
