package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/testenv"
)

// Live tests: the functions against a real API server, on the captured fixtures.

// live starts a live test: the environment, a context, a namespace of its own and Gomega.
func live(t *testing.T) (*testenv.Env, context.Context, string, *WithT) {
	t.Helper()
	e := liveEnv(t)
	return e, context.Background(), e.NewNamespace(t), NewWithT(t)
}

// install creates a fixture's Secrets (and Lease) in ns and returns the fixture as stored.
func install(t *testing.T, ns, name string) fixture {
	t.Helper()
	e := liveEnv(t)
	f := loadFixture(t, name)
	for i := range f.Secrets {
		f.Secrets[i].Namespace = ns
		if err := e.Client.Create(context.Background(), &f.Secrets[i]); err != nil {
			t.Fatalf("create %s: %v", f.Secrets[i].Name, err)
		}
	}
	if f.Lease != nil {
		f.Lease.Namespace = ns
		if err := e.Client.Create(context.Background(), f.Lease); err != nil {
			t.Fatalf("create %s: %v", f.Lease.Name, err)
		}
	}
	return f
}

// owner creates a TerraformCluster and returns the owner reference state Secrets get.
func owner(t *testing.T, ns, name string) metav1.OwnerReference {
	t.Helper()
	e := liveEnv(t)
	tc := testenv.TerraformCluster(ns, name, "demo", "example.com/module:v1")
	if err := e.Client.Create(context.Background(), tc); err != nil {
		t.Fatal(err)
	}
	ref, err := OwnerReference(tc, e.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func getSecret(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := liveEnv(t).Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return &s
}

func TestReadLive(t *testing.T) {
	e, ctx, ns, g := live(t)

	chunked := install(t, ns, "chunked-small")
	locked := install(t, ns, "locked")

	s, err := Read(ctx, e.Client, ns, chunked.Suffix)
	g.Expect(err).NotTo(HaveOccurred())
	want, _ := Decode(chunked.Secrets, chunked.Suffix)
	g.Expect(s.Digest).To(Equal(want.Digest))
	g.Expect(s.Chunks).To(Equal(want.Chunks))
	g.Expect(s.Namespace).To(Equal(ns))

	_, err = Read(ctx, e.Client, ns, "0000000000000000-m")
	g.Expect(errors.Is(err, ErrNotFound)).To(BeTrue())

	// A Secret that lost the backend's labels is invisible to the backend and to Read.
	base := getSecret(t, ns, contract.StateSecretName(chunked.Suffix))
	delete(base.Labels, contract.BackendStateLabel)
	g.Expect(e.Client.Update(ctx, base)).To(Succeed())
	_, err = Read(ctx, e.Client, ns, chunked.Suffix)
	g.Expect(Reason(err)).To(Equal(captfv1.StateInconsistentReason))

	l, err := ReadLock(ctx, e.Client, ns, locked.Suffix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.Exists).To(BeTrue())
	g.Expect(l.Locked()).To(BeTrue())
	g.Expect(l.Info).NotTo(BeNil())
	g.Expect(l.Info.ID).To(Equal(l.Holder))
	g.Expect(l.Info.Operation).To(Equal("OperationTypeApply"))
	g.Expect(l.Info.Who).To(ContainSubstring("@"))
	g.Expect(l.Info.Version).To(Equal("1.12.6"))
	g.Expect(l.Info.Created).To(BeTemporally("<", time.Now()))
	g.Expect(l.ResourceVersion).NotTo(BeEmpty())

	// Unlocked the way the backend unlocks: no holder, no lock info.
	var lease = locked.Lease.DeepCopy()
	g.Expect(e.Client.Get(ctx, client.ObjectKeyFromObject(lease), lease)).To(Succeed())
	lease.Spec.HolderIdentity = nil
	delete(lease.Annotations, contract.LockInfoAnnotation)
	g.Expect(e.Client.Update(ctx, lease)).To(Succeed())
	l, err = ReadLock(ctx, e.Client, ns, locked.Suffix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.Exists).To(BeTrue())
	g.Expect(l.Locked()).To(BeFalse())

	// An annotation that does not decode is a lock held by someone unknown.
	lease.Spec.HolderIdentity = ptr.To("someone")
	metav1.SetMetaDataAnnotation(&lease.ObjectMeta, contract.LockInfoAnnotation, "{not json")
	g.Expect(e.Client.Update(ctx, lease)).To(Succeed())
	l, err = ReadLock(ctx, e.Client, ns, locked.Suffix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.Locked()).To(BeTrue())
	g.Expect(l.InfoUnreadable).To(BeTrue())
	g.Expect(l.Info).To(BeNil())

	l, err = ReadLock(ctx, e.Client, ns, chunked.Suffix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.Exists).To(BeFalse())
	g.Expect(l.Locked()).To(BeFalse())
}

func TestAdoptLive(t *testing.T) {
	e, ctx, ns, g := live(t)

	f := install(t, ns, "chunked-small")
	ref := owner(t, ns, "adopt")
	base := contract.StateSecretName(f.Suffix)

	// An earlier incarnation's reference (a management-cluster restore gives a new UID) and
	// an unrelated owner; and a Secret with the backend's labels that is no chunk.
	s := getSecret(t, ns, base)
	old := ref
	old.UID = "00000000-0000-0000-0000-000000000001"
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "00000000-0000-0000-0000-000000000002"}
	s.OwnerReferences = []metav1.OwnerReference{old, other}
	g.Expect(e.Client.Update(ctx, s)).To(Succeed())
	stray := secret(base+"-copy", []byte("x"))
	stray.Namespace, stray.Labels = ns, map[string]string(Selector(f.Suffix))
	g.Expect(e.Client.Create(ctx, &stray)).To(Succeed())

	g.Expect(Adopt(ctx, e.Client, ns, f.Suffix, ref, "h2:abc", "")).To(Succeed())
	versions := map[string]string{}
	for _, c := range f.Secrets {
		got := getSecret(t, ns, c.Name)
		versions[c.Name] = got.ResourceVersion
		want := []metav1.OwnerReference{ref}
		if c.Name == base {
			want = []metav1.OwnerReference{other, ref}
		}
		g.Expect(got.OwnerReferences).To(Equal(want), c.Name)
		g.Expect(got.Labels).To(HaveKeyWithValue(captfv1.ManagedLabel, "true"))
		g.Expect(got.Labels).To(HaveKeyWithValue(clusterctlv1.ClusterctlMoveLabel, ""))
		g.Expect(got.Data).To(Equal(c.Data), "adopting must not touch the state")
		if c.Name == base {
			g.Expect(got.Annotations).To(HaveKeyWithValue(captfv1.InputsHashAnnotation, "h2:abc"))
		} else {
			g.Expect(got.Annotations).NotTo(HaveKey(captfv1.InputsHashAnnotation))
		}
	}
	g.Expect(getSecret(t, ns, stray.Name).OwnerReferences).To(BeEmpty())
	g.Expect(e.Client.Delete(ctx, &stray)).To(Succeed())

	// Idempotent: nothing is written the second time.
	g.Expect(Adopt(ctx, e.Client, ns, f.Suffix, ref, "h2:abc", "")).To(Succeed())
	for _, c := range f.Secrets {
		g.Expect(getSecret(t, ns, c.Name).ResourceVersion).To(Equal(versions[c.Name]))
	}
	snap, err := Read(ctx, e.Client, ns, f.Suffix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(snap.InputsHash).To(Equal("h2:abc"))
	g.Expect(snap.Image).To(BeEmpty(), "no image recorded yet")

	// The module image that applied the state is recorded on the base Secret; "" keeps it.
	g.Expect(Adopt(ctx, e.Client, ns, f.Suffix, ref, "h2:abc", "m:v2")).To(Succeed())
	g.Expect(Adopt(ctx, e.Client, ns, f.Suffix, ref, "h2:abc", "")).To(Succeed())
	snap, err = Read(ctx, e.Client, ns, f.Suffix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(snap.Image).To(Equal("m:v2"))
	g.Expect(getSecret(t, ns, base).Annotations).To(HaveKeyWithValue(captfv1.AppliedImageAnnotation, "m:v2"))

	// Conflict-safe: the backend writes between our read and our patch; the patch is refused
	// on the stale resourceVersion, read again and applied on top of the backend's write.
	raced := false
	ww, err := client.NewWithWatch(e.Config, client.Options{Scheme: e.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	c := interceptor.NewClient(ww, interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if !raced && obj.GetName() == base {
				raced = true
				s := getSecret(t, ns, base)
				s.Annotations["encoding"] = "gzip-rewritten"
				if err := cl.Update(ctx, s); err != nil {
					return err
				}
			}
			return cl.Patch(ctx, obj, patch, opts...)
		},
	})
	g.Expect(Adopt(ctx, c, ns, f.Suffix, ref, "h2:def", "")).To(Succeed())
	g.Expect(raced).To(BeTrue())
	got := getSecret(t, ns, base)
	g.Expect(got.Annotations).To(HaveKeyWithValue(captfv1.InputsHashAnnotation, "h2:def"))
	g.Expect(got.Annotations).To(HaveKeyWithValue("encoding", "gzip-rewritten"))

	g.Expect(Reason(Adopt(ctx, e.Client, ns, "0000000000000000-m", ref, "h2:abc", ""))).To(Equal(captfv1.StateNotFoundReason))
}

// snapshotWith decodes the relabeled fixture with another serial, compressed at level, so
// tests can make states of other serials and digests from a real one.
func snapshotWith(t *testing.T, ns string, serial int64, level int) *Snapshot {
	t.Helper()
	f := loadFixture(t, "relabeled")
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(gunzip(t, f.Secrets[0].Data[contract.BackendStateKey]), &doc); err != nil {
		t.Fatal(err)
	}
	doc["serial"] = json.RawMessage(strconv.FormatInt(serial, 10))
	plain, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	s := withData(f.Secrets[0], gz(t, plain, level))
	s.Namespace = ns
	snap, err := Decode([]corev1.Secret{s}, f.Suffix)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func TestBackupsLive(t *testing.T) {
	e, ctx, ns, g := live(t)
	ref := owner(t, ns, "backups")
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(minutes int) BackupOptions {
		return BackupOptions{Keep: 2, SourceJob: "captf-c-backups-apply-a1-abc123", Now: now.Add(time.Duration(minutes) * time.Minute)}
	}

	// A real chunked state, backed up verbatim.
	f := install(t, ns, "chunked-small")
	snap, err := Read(ctx, e.Client, ns, f.Suffix)
	g.Expect(err).NotTo(HaveOccurred())
	snap.InputsHash = "h2:applied"
	name, err := Backup(ctx, e.Client, snap, ref, at(0))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(name).To(Equal(BackupName(f.Suffix, snap.Serial, "")))
	for i, c := range f.Secrets {
		b := getSecret(t, ns, ChunkName(name, i))
		g.Expect(b.Data[contract.BackendStateKey]).To(Equal(c.Data[contract.BackendStateKey]))
		g.Expect(b.Immutable).To(Equal(ptr.To(true)))
		g.Expect(b.OwnerReferences).To(Equal([]metav1.OwnerReference{ref}))
		g.Expect(b.Labels).To(Equal(map[string]string{
			captfv1.StateBackupLabel: "true", captfv1.StateBackupSuffixLabel: f.Suffix,
			captfv1.ManagedLabel: "true", clusterctlv1.ClusterctlMoveLabel: "",
		}))
		g.Expect(b.Annotations).To(HaveKeyWithValue(BackupSerialAnnotation, strconv.FormatInt(snap.Serial, 10)))
		g.Expect(b.Annotations).To(HaveKeyWithValue(BackupLineageAnnotation, snap.Lineage))
		g.Expect(b.Annotations).To(HaveKeyWithValue(BackupTakenAtAnnotation, "2026-01-02T03:04:05Z"))
		g.Expect(b.Annotations).To(HaveKeyWithValue(BackupSourceJobAnnotation, "captf-c-backups-apply-a1-abc123"))
		g.Expect(b.Annotations).To(HaveKeyWithValue(BackupDigestAnnotation, snap.Digest))
		g.Expect(b.Annotations).To(HaveKeyWithValue(BackupResourcesAnnotation, "3"))
		g.Expect(b.Annotations).To(HaveKeyWithValue(BackupSetAnnotation, name))
		g.Expect(b.Annotations).To(HaveKeyWithValue(BackupChunkAnnotation, strconv.Itoa(i)))
		g.Expect(b.Annotations).To(HaveKeyWithValue(BackupChunksAnnotation, strconv.Itoa(len(f.Secrets))))
		if i == 0 {
			g.Expect(b.Annotations).To(HaveKeyWithValue(captfv1.InputsHashAnnotation, "h2:applied"))
		} else {
			g.Expect(b.Annotations).NotTo(HaveKey(captfv1.InputsHashAnnotation))
		}
	}
	// The backup restores: read back as a state, it is the same state.
	set, err := FindBackup(ctx, e.Client, ns, f.Suffix, snap.Serial)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(set.Chunks).To(HaveLen(len(f.Secrets)))
	var copies []corev1.Secret
	for i, n := range set.Chunks {
		c := getSecret(t, ns, n)
		c.Name = ChunkName(contract.StateSecretName(f.Suffix), i)
		copies = append(copies, *c)
	}
	back, err := Decode(copies, f.Suffix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back.Digest).To(Equal(snap.Digest))

	// Again: nothing new.
	again, err := Backup(ctx, e.Client, snap, ref, at(1))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(name))
	sets, err := Backups(ctx, e.Client, ns, f.Suffix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sets).To(HaveLen(1))
	g.Expect(sets[0].TakenAt).To(BeTemporally("==", now))

	// The backend's own labels do not follow; labels passed to the backend do.
	relabeled := snapshotWith(t, ns, 1, 6)
	g.Expect(relabeled.Labels).To(HaveKey(captfv1.OwnerKindLabel))
	rname, err := Backup(ctx, e.Client, relabeled, ref, BackupOptions{Keep: 5, Now: now})
	g.Expect(err).NotTo(HaveOccurred())
	rb := getSecret(t, ns, rname)
	g.Expect(rb.Labels).To(HaveKeyWithValue(captfv1.OwnerKindLabel, captfv1.KindCluster))
	for k := range rb.Labels {
		g.Expect(k).NotTo(HavePrefix("tfstate"))
		g.Expect(k).NotTo(Equal(contract.BackendManagedByLabel))
	}
	g.Expect(rb.Annotations).NotTo(HaveKey(BackupSourceJobAnnotation))
}

func TestBackupRotationLive(t *testing.T) {
	e, ctx, ns, g := live(t)
	ref := owner(t, ns, "rotation")
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	opts := func(minutes, keep int) BackupOptions {
		return BackupOptions{Keep: keep, Now: now.Add(time.Duration(minutes) * time.Minute)}
	}
	s1, s2, s3 := snapshotWith(t, ns, 1, 6), snapshotWith(t, ns, 2, 6), snapshotWith(t, ns, 3, 6)
	suffix := s1.Suffix
	names := func() []string {
		sets, err := Backups(ctx, e.Client, ns, suffix)
		g.Expect(err).NotTo(HaveOccurred())
		var out []string
		for _, s := range sets {
			out = append(out, s.Name+map[bool]string{true: "", false: " (incomplete)"}[s.Complete])
		}
		return out
	}

	for i, s := range []*Snapshot{s1, s2, s3} {
		_, err := Backup(ctx, e.Client, s, ref, opts(i, 2))
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(names()).To(Equal([]string{BackupName(suffix, s3.Serial, ""), BackupName(suffix, s2.Serial, "")}))

	// The same serial with other bytes (a restore pushed an older copy, say) gets the digest.
	s3b := snapshotWith(t, ns, 3, 1)
	g.Expect(s3b.Digest).NotTo(Equal(s3.Digest))
	name, err := Backup(ctx, e.Client, s3b, ref, opts(3, 2))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(name).To(Equal(BackupName(suffix, s3.Serial, s3b.Digest[:8])))
	g.Expect(names()).To(Equal([]string{name, BackupName(suffix, s3.Serial, "")}))

	// An interrupted backup: the newest set of all is incomplete and is kept (it may still be
	// written); a later backup makes it old, and it goes.
	s4 := twoChunks(snapshotWith(t, ns, 4, 6))
	interrupted := interruptedSet(t, ns, s4, ref, now.Add(4*time.Minute))
	g.Expect(Prune(ctx, e.Client, ns, suffix, 2)).To(BeEmpty())
	g.Expect(names()).To(Equal([]string{interrupted + " (incomplete)", name, BackupName(suffix, s3.Serial, "")}))
	s5 := snapshotWith(t, ns, 5, 6)
	_, err = Backup(ctx, e.Client, s5, ref, opts(5, 2))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names()).To(Equal([]string{BackupName(suffix, s5.Serial, ""), name}))

	// Resuming: the interrupted set completes when the same state is backed up again.
	interrupted = interruptedSet(t, ns, s4, ref, now.Add(6*time.Minute))
	resumed, err := Backup(ctx, e.Client, s4, ref, opts(7, 3))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resumed).To(Equal(interrupted))
	sets, err := Backups(ctx, e.Client, ns, suffix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sets[0].Name).To(Equal(interrupted))
	g.Expect(sets[0].Complete).To(BeTrue())
	g.Expect(sets[0].TakenAt).To(BeTemporally("==", now.Add(6*time.Minute)), "a resumed set keeps its start time")

	// Keep 0: no new backups, and the existing ones stay.
	s6 := snapshotWith(t, ns, 6, 6)
	none, err := Backup(ctx, e.Client, s6, ref, opts(8, 0))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(none).To(BeEmpty())
	g.Expect(Prune(ctx, e.Client, ns, suffix, 0)).To(BeEmpty())
	g.Expect(names()).To(HaveLen(3))

	// Status lists complete sets, newest first.
	status := StatusBackups(sets)
	g.Expect(status).To(HaveLen(3))
	g.Expect(status[0]).To(Equal(captfv1.StateBackup{Serial: s4.Serial, SecretName: interrupted,
		TakenAt: ptr.To(metav1.NewTime(now.Add(6 * time.Minute))), Resources: 3, Bytes: s4.Bytes}))

	_, err = FindBackup(ctx, e.Client, ns, suffix, 999)
	g.Expect(errors.Is(err, ErrBackupNotFound)).To(BeTrue())
	found, err := FindBackup(ctx, e.Client, ns, suffix, s3.Serial)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found.Name).To(Equal(name), "the newest complete set of the serial")

	// The same state cut into another number of chunks: the interrupted set cannot be resumed,
	// so it is started again.
	s8 := twoChunks(snapshotWith(t, ns, 8, 6))
	miscut := interruptedSet(t, ns, s8, ref, now.Add(7*time.Minute))
	s8.data = [][]byte{bytes.Join(s8.data, nil)}
	again, err := Backup(ctx, e.Client, s8, ref, opts(7, 10))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(miscut))
	sets, err = Backups(ctx, e.Client, ns, suffix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sets[0].Name).To(Equal(miscut))
	g.Expect(sets[0].Complete).To(BeTrue())
	g.Expect(sets[0].Chunks).To(HaveLen(1))

	// A chunk under our name with other data is a conflict, never overwritten.
	s7 := snapshotWith(t, ns, 7, 6)
	squat := secret(BackupName(suffix, s7.Serial, ""), []byte("other"))
	squat.Namespace = ns
	squat.Labels = map[string]string{captfv1.StateBackupLabel: "true", captfv1.StateBackupSuffixLabel: suffix}
	squat.Annotations = map[string]string{BackupSetAnnotation: "elsewhere"}
	g.Expect(e.Client.Create(ctx, &squat)).To(Succeed())
	_, err = Backup(ctx, e.Client, s7, ref, BackupOptions{Keep: 10, Now: now.Add(9 * time.Minute)})
	g.Expect(errors.Is(err, ErrBackupConflict)).To(BeTrue(), "%v", err)
}

// twoChunks cuts a single-chunk state in two, as Terraform would cut a larger one; the digest
// stays, as it covers the concatenation.
func twoChunks(snap *Snapshot) *Snapshot {
	half := len(snap.data[0]) / 2
	snap.data = [][]byte{snap.data[0][:half], snap.data[0][half:]}
	return snap
}

// interruptedSet writes only the last chunk of a backup of a two-chunk snap, as a backup that
// died half way leaves it.
func interruptedSet(t *testing.T, ns string, snap *Snapshot, ref metav1.OwnerReference, at time.Time) string {
	t.Helper()
	sets, err := Backups(context.Background(), liveEnv(t).Client, ns, snap.Suffix)
	if err != nil {
		t.Fatal(err)
	}
	name, _, _, err := chooseSet(sets, snap, at)
	if err != nil {
		t.Fatal(err)
	}
	if err := createChunk(context.Background(), liveEnv(t).Client, snap, ref, "", name, at, 1); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestRetainLive(t *testing.T) {
	e, ctx, ns, g := live(t)

	f := install(t, ns, "chunked-small")
	ref := owner(t, ns, "retain")
	g.Expect(Adopt(ctx, e.Client, ns, f.Suffix, ref, "h2:x", "")).To(Succeed())
	snap, err := Read(ctx, e.Client, ns, f.Suffix)
	g.Expect(err).NotTo(HaveOccurred())
	backup, err := Backup(ctx, e.Client, snap, ref, BackupOptions{Keep: 5})
	g.Expect(err).NotTo(HaveOccurred())
	inputs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "captf-inputs-c-retain", OwnerReferences: []metav1.OwnerReference{ref}}}
	g.Expect(e.Client.Create(ctx, inputs)).To(Succeed())
	all := append([]string{inputs.Name, backup}, snap.Chunks...)

	for range 2 { // idempotent
		g.Expect(Retain(ctx, e.Client, e.Client, ns, f.Suffix, ref.UID, inputs.Name)).To(Succeed())
		for _, n := range all {
			s := getSecret(t, ns, n)
			g.Expect(s.OwnerReferences).To(BeEmpty(), n)
			g.Expect(s.Labels).To(HaveKeyWithValue(captfv1.RetainedFromUIDLabel, string(ref.UID)), n)
		}
	}
	snap, err = Read(ctx, e.Client, ns, f.Suffix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(snap.RetainedFrom()).To(Equal(string(ref.UID)))

	// The object goes; a new one of the same name adopts what was retained.
	var tc captfv1.TerraformCluster
	g.Expect(e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "retain"}, &tc)).To(Succeed())
	g.Expect(e.Client.Delete(ctx, &tc)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(e.Client.Get(ctx, client.ObjectKeyFromObject(&tc), &tc))
	}).Should(BeTrue())
	next := owner(t, ns, "retain")
	g.Expect(next.UID).NotTo(Equal(ref.UID))
	for range 2 {
		g.Expect(AdoptRetained(ctx, e.Client, ns, f.Suffix, next, inputs.Name)).To(Succeed())
		for _, n := range all {
			s := getSecret(t, ns, n)
			g.Expect(s.OwnerReferences).To(Equal([]metav1.OwnerReference{next}), n)
			g.Expect(s.Labels).NotTo(HaveKey(captfv1.RetainedFromUIDLabel), n)
		}
	}
	// Retain and adopt without an inputs Secret, or with one that does not exist.
	g.Expect(Retain(ctx, e.Client, e.Client, ns, f.Suffix, types.UID("u"), "")).To(Succeed())
	g.Expect(AdoptRetained(ctx, e.Client, ns, f.Suffix, next, "absent")).To(Succeed())
}

func TestDeleteLive(t *testing.T) {
	e, ctx, ns, g := live(t)

	f := install(t, ns, "locked")
	stray := secret(contract.StateSecretName(f.Suffix)+"-copy", []byte("x"))
	stray.Namespace, stray.Labels = ns, map[string]string(Selector(f.Suffix))
	g.Expect(e.Client.Create(ctx, &stray)).To(Succeed())
	snap, err := Decode(f.Secrets, f.Suffix)
	g.Expect(err).NotTo(HaveOccurred())
	backup, err := Backup(ctx, e.Client, snap, owner(t, ns, "delete"), BackupOptions{Keep: 1})
	g.Expect(err).NotTo(HaveOccurred())

	for range 2 { // gone is success
		g.Expect(Delete(ctx, e.Client, e.Client, ns, f.Suffix)).To(Succeed())
	}
	_, err = Read(ctx, e.Client, ns, f.Suffix)
	g.Expect(Reason(err)).To(Equal(captfv1.StateInconsistentReason), "only the stray copy is left")
	l, err := ReadLock(ctx, e.Client, ns, f.Suffix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.Exists).To(BeFalse())
	getSecret(t, ns, stray.Name)
	getSecret(t, ns, backup)
}
