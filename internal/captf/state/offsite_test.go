package state

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/contract"
)

// TestOffsiteRoundTripLive: what BackupData hands the offsite store is the set's state bytes;
// RecordOffsite's record is read back by Backups; and ImportBackup turns those bytes, with the
// state's Secrets and backups gone (a namespace deleted and re-created), into a backup that
// FindBackup and VerifyBackup accept, refusing bytes that are not what the copy records.
func TestOffsiteRoundTripLive(t *testing.T) {
	e, ctx, ns, g := live(t)
	ref := owner(t, ns, "offsite")
	f := install(t, ns, "chunked-small")
	snap, err := Read(ctx, e.Client, ns, f.Suffix)
	g.Expect(err).NotTo(HaveOccurred())
	snap.InputsHash = "h2:applied"
	name, err := Backup(ctx, e.Client, snap, ref, BackupOptions{Keep: 5})
	g.Expect(err).NotTo(HaveOccurred())
	set, err := FindBackup(ctx, e.Client, ns, f.Suffix, snap.Serial)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(set.Offsite()).To(BeEmpty())

	data, err := BackupData(ctx, e.Client, ns, set)
	g.Expect(err).NotTo(HaveOccurred())
	var want []byte
	for _, s := range f.Secrets {
		want = append(want, s.Data[contract.BackendStateKey]...)
	}
	g.Expect(data).To(Equal(want))

	const loc = "s3://bucket/p/ns/TerraformCluster/offsite/x.tfstate.gz"
	g.Expect(RecordOffsite(ctx, e.Client, ns, set, loc)).To(Succeed())
	set, err = FindBackup(ctx, e.Client, ns, f.Suffix, snap.Serial)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(set.Offsite()).To(Equal(loc))

	// Everything of the state goes, as with its namespace.
	var all corev1.SecretList
	g.Expect(e.Client.List(ctx, &all, client.InNamespace(ns))).To(Succeed())
	for i := range all.Items {
		g.Expect(e.Client.Delete(ctx, &all.Items[i])).To(Succeed())
	}
	in := Imported{Serial: snap.Serial, Lineage: snap.Lineage, Digest: snap.Digest, InputsHash: "h2:applied", Location: loc,
		Labels: map[string]string{"example.com/owner": "offsite"}}

	// Bytes that are not the recorded state are refused, and write nothing.
	bad := in
	bad.Lineage = "another-history"
	_, err = ImportBackup(ctx, e.Client, ns, f.Suffix, ref, bad, data, time.Now())
	g.Expect(errors.Is(err, ErrBackupInvalid)).To(BeTrue(), "%v", err)
	_, err = ImportBackup(ctx, e.Client, ns, f.Suffix, ref, in, data[:len(data)/2], time.Now())
	g.Expect(err).To(HaveOccurred())
	sets, err := Backups(ctx, e.Client, ns, f.Suffix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sets).To(BeEmpty())

	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	imported, err := ImportBackup(ctx, e.Client, ns, f.Suffix, ref, in, data, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(imported).To(Equal(name))
	set, err = FindBackup(ctx, e.Client, ns, f.Suffix, snap.Serial)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(VerifyBackup(ctx, e.Client, ns, set, "")).To(Succeed())
	g.Expect(set.Offsite()).To(Equal(loc))
	g.Expect(set.TakenAt.Equal(now)).To(BeTrue())
	g.Expect(set.InputsHash).To(Equal("h2:applied"))
	g.Expect(set.Digest).To(Equal(snap.Digest))
	anchor := getSecret(t, ns, set.Name)
	g.Expect(anchor.Labels).To(HaveKeyWithValue("example.com/owner", "offsite"))
	g.Expect(anchor.OwnerReferences[0].UID).To(Equal(ref.UID))
}
