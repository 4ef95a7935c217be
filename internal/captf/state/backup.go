package state

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/statekey"
)

// Annotations on every chunk Secret of a backup (the anchor's names). They belong in
// api/captf/v1alpha1/labels.go, next to StateBackupLabel; they live here until they move.
const (
	BackupSerialAnnotation    = "captf.io/state-backup-serial"
	BackupLineageAnnotation   = "captf.io/state-backup-lineage"
	BackupTakenAtAnnotation   = "captf.io/state-backup-taken-at"
	BackupSourceJobAnnotation = "captf.io/state-backup-source-job"
	BackupDigestAnnotation    = "captf.io/state-backup-digest"
	BackupResourcesAnnotation = "captf.io/state-backup-resources"
	// BackupSetAnnotation names the set's first Secret, which is the set's name.
	BackupSetAnnotation    = "captf.io/state-backup-set"
	BackupChunkAnnotation  = "captf.io/state-backup-chunk"
	BackupChunksAnnotation = "captf.io/state-backup-chunks"
	// BackupBytesAnnotation is the set's compressed size, so status can show it from a
	// metadata-only list (not in the anchor).
	BackupBytesAnnotation = "captf.io/state-backup-bytes"
)

const (
	// DefaultBackups is the default of --state-backups.
	DefaultBackups = 5
	// MaxStatusBackups is how many backups status.stateBackups lists.
	MaxStatusBackups = 16

	backupPrefix = "captf-state-backup-"
	digestInName = 8
)

// Errors of backups.
var (
	// ErrBackupNotFound: no complete backup of the requested serial exists (the
	// RestoreBackupNotFound reason).
	ErrBackupNotFound = errors.New("no complete backup of that serial")
	// ErrBackupConflict: a backup Secret exists under the name a backup needs, with other data.
	ErrBackupConflict = errors.New("a backup Secret with other data exists under that name")
)

// BackupSet is one backup: a verbatim copy of a state's compressed chunks.
type BackupSet struct {
	// Name is the set's first Secret, captf-state-backup-<suffix>-<serial>[-<digest8>].
	Name string
	// Serial, Lineage and Digest are those of the state backed up.
	Serial  int64
	Lineage string
	Digest  string
	// TakenAt is when the backup was started.
	TakenAt time.Time
	// Resources counts managed resource blocks, as Snapshot.Resources.
	Resources int
	// Bytes is the compressed size.
	Bytes int64
	// InputsHash is the applied inputs hash the state carried, "" if none.
	InputsHash string
	// SourceJob names the Job whose state this was, if the caller said.
	SourceJob string
	// Chunks names the set's Secrets in order; for an incomplete set, those that exist.
	Chunks []string
	// Complete is true when every chunk exists and all agree on what they hold.
	Complete bool

	chunks int // as the chunks annotation says
	objs   []metav1.PartialObjectMetadata
}

// BackupOptions tune Backup.
type BackupOptions struct {
	// Keep is --state-backups: the newest complete sets kept. 0 takes no new backups and
	// deletes none, so existing ones stay restorable.
	Keep int
	// SourceJob is recorded on the backup if set.
	SourceJob string
	// Now is the time recorded as taken-at; zero means time.Now().
	Now time.Time
}

// BackupName is the name of a backup set of suffix and serial; digest8 (the first 8 hex of the
// state digest) is set only when another set of the same serial with a different digest
// already has the plain name, as after a restore.
func BackupName(suffix string, serial int64, digest8 string) string {
	n := backupPrefix + suffix + "-" + strconv.FormatInt(serial, 10)
	if digest8 != "" {
		n += "-" + digest8
	}
	return n
}

// BackupSelector selects the backup Secrets of suffix.
func BackupSelector(suffix string) client.MatchingLabels {
	return client.MatchingLabels{captfv1.StateBackupLabel: "true", captfv1.StateBackupSuffixLabel: suffix}
}

// Backup copies the chunks of a readable state into a backup set owned by owner (see
// OwnerReference: it survives a hand-deleted state and is collected with the object), then
// prunes to opts.Keep complete sets. Only a Snapshot from Decode or Read can be backed up, so
// an encrypted, corrupt or inconsistent state never is. It returns the set's name; a complete
// set of the same serial and digest means there is nothing to do, and an incomplete one is
// resumed (a chunk that exists with the same data is fine; other data is ErrBackupConflict).
// With opts.Keep 0 it does nothing and returns "".
func Backup(ctx context.Context, c client.Client, snap *Snapshot, owner metav1.OwnerReference, opts BackupOptions) (string, error) {
	if opts.Keep <= 0 {
		return "", nil
	}
	if len(snap.data) == 0 || snap.Digest == "" {
		return "", errors.New("state: back up state: the snapshot holds no chunks; back up only what Read or Decode returned")
	}
	sets, err := Backups(ctx, c, snap.Namespace, snap.Suffix)
	if err != nil {
		return "", err
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	name, takenAt, done, err := chooseSet(sets, snap, now)
	if err != nil {
		return "", err
	}
	if err := discardMiscut(ctx, c, sets, name, len(snap.data)); err != nil {
		return "", err
	}
	if !done {
		for i := range snap.data {
			if err := createChunk(ctx, c, snap, owner, opts.SourceJob, name, takenAt, i); err != nil {
				return "", err
			}
		}
		if sets, err = Backups(ctx, c, snap.Namespace, snap.Suffix); err != nil {
			return "", err
		}
	}
	if _, err := prune(ctx, c, sets, opts.Keep); err != nil {
		return name, err
	}
	return name, nil
}

// chooseSet finds the set a snapshot goes into, and whether it is already complete.
func chooseSet(sets []BackupSet, snap *Snapshot, now time.Time) (string, time.Time, bool, error) {
	taken := map[string]bool{}
	for _, s := range sets {
		taken[s.Name] = true
		if s.Serial == snap.Serial && s.Digest == snap.Digest {
			if s.Complete {
				return s.Name, s.TakenAt, true, nil
			}
			if !s.TakenAt.IsZero() {
				now = s.TakenAt
			}
			return s.Name, now, false, nil
		}
	}
	name := BackupName(snap.Suffix, snap.Serial, "")
	if !taken[name] {
		return name, now, false, nil
	}
	name = BackupName(snap.Suffix, snap.Serial, snap.Digest[:digestInName])
	if taken[name] {
		return "", now, false, fmt.Errorf("state: back up serial %d: %s holds another state with the same digest prefix: %w", snap.Serial, name, ErrBackupConflict)
	}
	return name, now, false, nil
}

// discardMiscut deletes the incomplete set name if it cuts the same state into another
// number of chunks (a backend with another chunk size wrote it): resuming it would only ever
// conflict, and it would stay the newest set, so pruning would never remove it.
func discardMiscut(ctx context.Context, c client.Client, sets []BackupSet, name string, chunks int) error {
	for _, s := range sets {
		if s.Name != name || s.Complete || s.chunks == chunks {
			continue
		}
		for j := range s.objs {
			if err := deleteMeta(ctx, c, &s.objs[j]); err != nil {
				return fmt.Errorf("state: delete backup Secret %s in namespace %s: %w", s.objs[j].Name, s.objs[j].Namespace, err)
			}
		}
	}
	return nil
}

func createChunk(ctx context.Context, c client.Client, snap *Snapshot, owner metav1.OwnerReference, job, set string, takenAt time.Time, i int) error {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       snap.Namespace,
			Name:            ChunkName(set, i),
			Labels:          backupLabels(snap),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID}},
			Annotations: map[string]string{
				BackupSerialAnnotation:    strconv.FormatInt(snap.Serial, 10),
				BackupLineageAnnotation:   snap.Lineage,
				BackupTakenAtAnnotation:   takenAt.UTC().Format(time.RFC3339Nano),
				BackupDigestAnnotation:    snap.Digest,
				BackupResourcesAnnotation: strconv.Itoa(snap.Resources),
				BackupSetAnnotation:       set,
				BackupChunkAnnotation:     strconv.Itoa(i),
				BackupChunksAnnotation:    strconv.Itoa(len(snap.data)),
				BackupBytesAnnotation:     strconv.FormatInt(snap.Bytes, 10),
			},
		},
		Type:      corev1.SecretTypeOpaque,
		Immutable: ptr.To(true), // a backup is a record; only its metadata may change
		Data:      map[string][]byte{contract.BackendStateKey: snap.data[i]},
	}
	if job != "" {
		s.Annotations[BackupSourceJobAnnotation] = job
	}
	if i == 0 && snap.InputsHash != "" {
		s.Annotations[captfv1.InputsHashAnnotation] = snap.InputsHash
	}
	err := c.Create(ctx, s)
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("state: create backup Secret %s in namespace %s: %w", s.Name, s.Namespace, err)
	}
	// Resuming an interrupted backup: the chunk must hold exactly what we would write.
	var have corev1.Secret
	if err := c.Get(ctx, client.ObjectKeyFromObject(s), &have); err != nil {
		return fmt.Errorf("state: get backup Secret %s in namespace %s: %w", s.Name, s.Namespace, err)
	}
	if have.Annotations[BackupDigestAnnotation] != snap.Digest || have.Annotations[BackupChunkAnnotation] != strconv.Itoa(i) ||
		!bytes.Equal(have.Data[contract.BackendStateKey], snap.data[i]) {
		return fmt.Errorf("state: create backup Secret %s in namespace %s: %w", s.Name, s.Namespace, ErrBackupConflict)
	}
	return nil
}

// backupLabels are the state's labels without the backend's own, plus the backup labels.
// app.kubernetes.io/managed-by=terraform goes too: the backend set it, and it would claim
// Terraform manages the backup.
func backupLabels(snap *Snapshot) map[string]string {
	l := make(map[string]string, len(snap.Labels)+4)
	for k, v := range snap.Labels {
		if strings.HasPrefix(k, contract.BackendStateLabel) || k == contract.BackendManagedByLabel || k == captfv1.RetainedFromUIDLabel {
			continue
		}
		l[k] = v
	}
	l[captfv1.StateBackupLabel] = "true"
	l[captfv1.StateBackupSuffixLabel] = snap.Suffix
	l[captfv1.ManagedLabel] = "true"
	l[clusterctlv1.ClusterctlMoveLabel] = ""
	return l
}

// Backups lists the backup sets of suffix, newest first (by taken-at, then serial, then
// name), complete or not. It reads metadata only.
func Backups(ctx context.Context, c client.Reader, namespace, suffix string) ([]BackupSet, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := c.List(ctx, list, client.InNamespace(namespace), BackupSelector(suffix)); err != nil {
		return nil, fmt.Errorf("state: list backups of %s in namespace %s: %w", contract.StateSecretName(suffix), namespace, err)
	}
	return groupSets(list.Items), nil
}

// groupSets groups backup chunk Secrets into sets and judges each set's completeness.
func groupSets(objs []metav1.PartialObjectMetadata) []BackupSet {
	bySet := map[string][]metav1.PartialObjectMetadata{}
	for _, o := range objs {
		set := o.Annotations[BackupSetAnnotation]
		if set == "" {
			set = o.Name // unusable on its own: an incomplete set of one, pruned unless newest
		}
		bySet[set] = append(bySet[set], o)
	}
	sets := make([]BackupSet, 0, len(bySet))
	for name, members := range bySet {
		sets = append(sets, newSet(name, members))
	}
	slices.SortFunc(sets, func(a, b BackupSet) int {
		return cmp.Or(b.TakenAt.Compare(a.TakenAt), cmp.Compare(b.Serial, a.Serial), strings.Compare(b.Name, a.Name))
	})
	return sets
}

func newSet(name string, members []metav1.PartialObjectMetadata) BackupSet {
	slices.SortFunc(members, func(a, b metav1.PartialObjectMetadata) int {
		ai, _ := strconv.Atoi(a.Annotations[BackupChunkAnnotation])
		bi, _ := strconv.Atoi(b.Annotations[BackupChunkAnnotation])
		return cmp.Or(cmp.Compare(ai, bi), strings.Compare(a.Name, b.Name))
	})
	first := members[0].Annotations
	s := BackupSet{Name: name, objs: members, Lineage: first[BackupLineageAnnotation], Digest: first[BackupDigestAnnotation],
		SourceJob: first[BackupSourceJobAnnotation], InputsHash: first[captfv1.InputsHashAnnotation]}
	s.Serial, _ = strconv.ParseInt(first[BackupSerialAnnotation], 10, 64)
	s.Resources, _ = strconv.Atoi(first[BackupResourcesAnnotation])
	s.Bytes, _ = strconv.ParseInt(first[BackupBytesAnnotation], 10, 64)
	s.TakenAt, _ = time.Parse(time.RFC3339Nano, first[BackupTakenAtAnnotation])
	if s.TakenAt.IsZero() {
		s.TakenAt = members[0].CreationTimestamp.Time
	}
	n, err := strconv.Atoi(first[BackupChunksAnnotation])
	s.chunks = n
	s.Complete = err == nil && n == len(members) && n <= MaxChunks && s.Digest != "" && first[BackupSerialAnnotation] != ""
	for i, m := range members {
		s.Chunks = append(s.Chunks, m.Name)
		a := m.Annotations
		if m.Name != ChunkName(name, i) || a[BackupChunkAnnotation] != strconv.Itoa(i) || a[BackupDigestAnnotation] != s.Digest ||
			a[BackupSerialAnnotation] != first[BackupSerialAnnotation] || a[BackupChunksAnnotation] != first[BackupChunksAnnotation] {
			s.Complete = false
		}
	}
	return s
}

// Prune deletes backup sets of suffix beyond the newest keep complete ones, and incomplete
// sets unless one is the newest set of all (it may still be being written). keep 0 deletes
// nothing. It returns the names of the sets deleted.
func Prune(ctx context.Context, c client.Client, namespace, suffix string, keep int) ([]string, error) {
	sets, err := Backups(ctx, c, namespace, suffix)
	if err != nil {
		return nil, err
	}
	return prune(ctx, c, sets, keep)
}

func prune(ctx context.Context, c client.Client, sets []BackupSet, keep int) ([]string, error) {
	if keep <= 0 {
		return nil, nil
	}
	var deleted []string
	kept := 0
	for i, s := range sets {
		if s.Complete && kept < keep {
			kept++
			continue
		}
		if !s.Complete && i == 0 {
			continue
		}
		for j := range s.objs {
			if err := deleteMeta(ctx, c, &s.objs[j]); err != nil {
				return deleted, fmt.Errorf("state: delete backup Secret %s in namespace %s: %w", s.objs[j].Name, s.objs[j].Namespace, err)
			}
		}
		deleted = append(deleted, s.Name)
	}
	return deleted, nil
}

// StatusBackups turns sets from Backups into status.stateBackups: the newest complete sets,
// at most MaxStatusBackups.
func StatusBackups(sets []BackupSet) []captfv1.StateBackup {
	var out []captfv1.StateBackup
	for _, s := range sets {
		if !s.Complete {
			continue
		}
		if len(out) == MaxStatusBackups {
			break
		}
		b := captfv1.StateBackup{Serial: s.Serial, SecretName: s.Name, Resources: int32(min(s.Resources, 1<<31-1)), Bytes: s.Bytes}
		if !s.TakenAt.IsZero() {
			b.TakenAt = ptr.To(metav1.NewTime(s.TakenAt))
		}
		out = append(out, b)
	}
	return out
}

// FindBackup returns the newest complete backup of serial, for a restore: its Chunks are the
// Secrets to project, in order. None is ErrBackupNotFound.
func FindBackup(ctx context.Context, c client.Reader, namespace, suffix string, serial int64) (BackupSet, error) {
	sets, err := Backups(ctx, c, namespace, suffix)
	if err != nil {
		return BackupSet{}, err
	}
	for _, s := range sets {
		if s.Complete && s.Serial == serial {
			return s, nil
		}
	}
	return BackupSet{}, fmt.Errorf("state: find backup of serial %d of %s in namespace %s: %w; status.stateBackups lists the serials that can be restored",
		serial, contract.StateSecretName(suffix), namespace, ErrBackupNotFound)
}

// ErrBackupInvalid: a backup's Secrets do not hold the state its annotations describe, or hold
// the state of another history than the one it would replace.
var ErrBackupInvalid = errors.New("the backup does not hold the state it claims")

// VerifyBackup reads a backup set's Secrets live and checks their data, not only their
// annotations (anyone who can write Secrets in the namespace can write those): the chunks, in
// order, have the digest the set records and decode to a readable state of the set's serial
// and lineage; and that lineage is currentLineage, the lineage of the state the restore would
// replace, unless there is none (""). A mismatch wraps ErrBackupInvalid.
func VerifyBackup(ctx context.Context, c client.Reader, namespace string, set BackupSet, currentLineage string) error {
	return VerifyBackupWith(ctx, c, namespace, "", set, currentLineage, nil)
}

// VerifyBackupWith is VerifyBackup that also reads a backup of an encrypted state with
// master, as the state of suffix (see DecodeWith): its serial and lineage are checked inside
// the ciphertext, so a backup whose clear fields were edited is refused too.
func VerifyBackupWith(ctx context.Context, c client.Reader, namespace, suffix string, set BackupSet, currentLineage string, master *statekey.Master) error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("state: backup %s: %s: %w", set.Name, fmt.Sprintf(format, args...), ErrBackupInvalid)
	}
	if len(set.Chunks) == 0 || len(set.Chunks) > MaxChunks {
		return invalid("it has %d chunks", len(set.Chunks))
	}
	data := make([][]byte, len(set.Chunks))
	sum := sha256.New()
	for i, name := range set.Chunks {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
			return fmt.Errorf("state: read backup Secret %s in namespace %s: %w", name, namespace, err)
		}
		data[i] = s.Data[contract.BackendStateKey]
		sum.Write(data[i])
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != set.Digest {
		return invalid("its data has digest %s, but the backup records %s", got, set.Digest)
	}
	facts, err := readState(&chunkReader{chunks: data})
	if err != nil {
		return invalid("its data does not decode as a state")
	}
	if facts.encrypted && master != nil {
		if facts, err = decryptState(data, namespace, suffix, master); err != nil {
			return invalid("%v", err)
		}
	}
	if err := facts.check(set.Name); err != nil {
		return invalid("%v", err)
	}
	switch {
	case facts.serial != set.Serial:
		return invalid("it holds serial %d, not %d", facts.serial, set.Serial)
	case facts.lineage != set.Lineage:
		return invalid("it holds lineage %s, but the backup records %s", facts.lineage, set.Lineage)
	case currentLineage != "" && facts.lineage != currentLineage:
		return invalid("it is of lineage %s, the current state of lineage %s: it is another state's history; delete the current state Secrets first if you mean to replace it", facts.lineage, currentLineage)
	}
	return nil
}
