package state

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// TestAdoptBackupsLive: backups naming an earlier object of the same kind and name, or no
// owner at all, get the live object as their one owner of that kind and name (other owners
// stay); backups retained by an earlier object are left alone; a second call writes nothing.
// DeleteBackups then deletes the object's backups and leaves the retained ones.
func TestAdoptBackupsLive(t *testing.T) {
	e, ctx, ns, g := live(t)
	f := install(t, ns, "chunked-small")
	ref := owner(t, ns, "restored")
	snap, err := Read(ctx, e.Client, ns, f.Suffix)
	g.Expect(err).NotTo(HaveOccurred())

	earlier := ref
	earlier.UID = types.UID("0d1d-earlier")
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep-me", UID: types.UID("cm")}
	stale, err := Backup(ctx, e.Client, snap, earlier, BackupOptions{Keep: 5, Now: time.Now().Add(-time.Hour)})
	g.Expect(err).NotTo(HaveOccurred())
	snap.Serial++ // another set of the same state, as a newer serial
	orphan, err := Backup(ctx, e.Client, snap, earlier, BackupOptions{Keep: 5})
	g.Expect(err).NotTo(HaveOccurred())
	sets, err := Backups(ctx, e.Client, ns, f.Suffix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sets).To(HaveLen(2))
	for _, s := range sets {
		for _, name := range s.Chunks {
			sec := getSecret(t, ns, name)
			before := sec.DeepCopy()
			switch s.Name {
			case stale:
				sec.OwnerReferences = append(sec.OwnerReferences, other)
			case orphan:
				sec.OwnerReferences = nil // restored without owner references
			}
			g.Expect(e.Client.Patch(ctx, sec, client.MergeFrom(before))).To(Succeed())
		}
	}
	retained := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: BackupName(f.Suffix, 1, "retained"),
		Labels: map[string]string{captfv1.StateBackupLabel: "true", captfv1.StateBackupSuffixLabel: f.Suffix,
			captfv1.RetainedFromUIDLabel: "0d1d-retained"}}}
	g.Expect(e.Client.Create(ctx, retained)).To(Succeed())

	n, err := AdoptBackups(ctx, e.Client, ns, f.Suffix, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(2*len(snap.Chunks)), "every chunk of both sets")
	for _, s := range sets {
		for _, name := range s.Chunks {
			want := []metav1.OwnerReference{ref}
			if s.Name == stale {
				want = []metav1.OwnerReference{other, ref}
			}
			g.Expect(getSecret(t, ns, name).OwnerReferences).To(Equal(want), name)
		}
	}
	g.Expect(getSecret(t, ns, retained.Name).OwnerReferences).To(BeEmpty(), "a retained backup is not adopted")
	n, err = AdoptBackups(ctx, e.Client, ns, f.Suffix, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(BeZero(), "nothing left to repair")

	g.Expect(DeleteBackups(ctx, e.Client, e.Client, ns, f.Suffix)).To(Succeed())
	left, err := Backups(ctx, e.Client, ns, f.Suffix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(left).To(HaveLen(1))
	g.Expect(left[0].Chunks).To(Equal([]string{retained.Name}), "the retained backup stays")
	g.Expect(DeleteBackups(ctx, e.Client, e.Client, ns, f.Suffix)).To(Succeed(), "idempotent")
}

// TestStateProtectionPolicyLive: config/admission/captf-state-protection.yaml refuses the
// garbage collector and the namespace controller (with their own ServiceAccounts, or as
// kube-controller-manager) the deletion of a managed state chunk, backup, durable inputs and
// plan key, and of a Secret or ConfigMap kept for destroys; it lets them delete everything else,
// and lets anyone else delete those too.
func TestStateProtectionPolicyLive(t *testing.T) {
	e, ctx, ns, g := live(t)
	managed := func(name string, labels map[string]string) *corev1.Secret {
		l := map[string]string{captfv1.ManagedLabel: "true"}
		for k, v := range labels {
			l[k] = v
		}
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l}}
	}
	protected := []*corev1.Secret{
		managed("tfstate-default-0123456789abcdef-c", map[string]string{"tfstate": "true"}),
		managed("captf-state-backup-0123456789abcdef-c-3", map[string]string{captfv1.StateBackupLabel: "true"}),
		managed("captf-inputs-c-web", nil),
		managed("captf-plankey-c-web", nil),
	}
	free := []*corev1.Secret{
		managed("captf-run-captf-c-web-apply-a1-abc123", nil),                                                                         // a Job's run Secret
		managed("captf-inputs-c-old", map[string]string{captfv1.RetainedFromUIDLabel: "0d1d"}),                                        // retained
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tfstate-default-foreign", Labels: map[string]string{"tfstate": "true"}}}, // not CAPTF's
	}
	for _, s := range append(append([]*corev1.Secret{}, protected...), free...) {
		g.Expect(e.Client.Create(ctx, s)).To(Succeed())
	}
	controllers := []string{
		"system:serviceaccount:kube-system:generic-garbage-collector",
		"system:serviceaccount:kube-system:namespace-controller",
		"system:kube-controller-manager",
	}
	for _, user := range controllers {
		c := e.As(t, user)
		for _, s := range protected {
			// Policies are compiled asynchronously after install: the first refusal may take a moment.
			g.Eventually(func() error { return c.Delete(ctx, s.DeepCopy(), client.DryRunAll) }, 30*time.Second, 100*time.Millisecond).Should(
				MatchError(And(ContainSubstring("CAPTF keeps Secret "+s.Name), ContainSubstring("deletionPolicy Retain"))), "%s deleting %s", user, s.Name)
			g.Expect(apierrors.IsForbidden(c.Delete(ctx, s.DeepCopy(), client.DryRunAll))).To(BeTrue())
		}
		for _, s := range free {
			g.Expect(c.Delete(ctx, s.DeepCopy(), client.DryRunAll)).To(Succeed(), "%s deleting %s", user, s.Name)
		}
	}
	// What Jobs ran with (credentials, image pull Secrets, env sources) is kept while labelled.
	kept := map[string]string{captfv1.KeptForDestroyLabel: "true"}
	keptObjs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloud-credentials", Labels: kept}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "module-env", Labels: kept}},
	}
	freeObjs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-credentials"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-env", Labels: map[string]string{captfv1.ManagedLabel: "true"}}},
	}
	for _, o := range append(append([]client.Object{}, keptObjs...), freeObjs...) {
		g.Expect(e.Client.Create(ctx, o)).To(Succeed())
	}
	for _, user := range controllers {
		c := e.As(t, user)
		for _, o := range keptObjs {
			g.Eventually(func() error { return c.Delete(ctx, o.DeepCopyObject().(client.Object), client.DryRunAll) }, 30*time.Second, 100*time.Millisecond).Should(
				MatchError(And(ContainSubstring("CAPTF keeps "+o.GetName()), ContainSubstring("captf.io/kept-for-destroy"))), "%s deleting %s", user, o.GetName())
		}
		for _, o := range freeObjs {
			g.Expect(c.Delete(ctx, o.DeepCopyObject().(client.Object), client.DryRunAll)).To(Succeed(), "%s deleting %s", user, o.GetName())
		}
	}
	person := e.As(t, "alice@example.com")
	for _, s := range protected {
		g.Expect(person.Delete(ctx, s)).To(Succeed(), "a person deleting %s", s.Name)
	}
	for _, o := range keptObjs {
		g.Expect(person.Delete(ctx, o)).To(Succeed(), "a person deleting %s", o.GetName())
	}
}
