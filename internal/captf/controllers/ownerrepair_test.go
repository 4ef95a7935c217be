package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/inputs"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/testenv"
)

// restorable lists every Secret a restore of the management cluster brings back for an object:
// its state chunks, backups, durable inputs and plan key. The manager makes the plan key when it
// first hashes a plan; for an object that never needed one, it is made here as the manager
// would (labelled, controlled by the object).
func restorable(t *testing.T, owner jobs.Owner) []corev1.Secret {
	t.Helper()
	ctx := context.Background()
	out := keptSecrets(t, owner)
	key := &corev1.Secret{}
	name := inputs.BoundedName("captf-plankey-" + contract.KindShort(owner.Kind) + "-" + owner.Name)
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: owner.Namespace, Name: name}, key)
	if apierrors.IsNotFound(err) {
		ref := owner.ControllerRef()
		ref.BlockOwnerDeletion = nil
		key = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Name: name, Labels: owner.MoveLabels(),
				OwnerReferences: []metav1.OwnerReference{ref}},
			Data: map[string][]byte{"key": []byte("0123456789abcdef0123456789abcdef")},
		}
		err = env.Client.Create(ctx, key)
	}
	if err != nil {
		t.Fatalf("plan key %s: %v", name, err)
	}
	return append(out, *key)
}

// asRestored is a Secret as a backup tool re-creates it: same data, labels and owner
// references, none of the server's fields.
func asRestored(s corev1.Secret) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace, Name: s.Name, Labels: s.Labels, Annotations: s.Annotations,
			OwnerReferences: s.OwnerReferences,
		},
		Type: s.Type, Immutable: s.Immutable, Data: s.Data,
	}
}

// TestOwnerRepairRestoredSecrets: a management cluster restored from a backup gives the
// TerraformCluster a new UID, and its state, backup, durable inputs and plan key Secrets come
// back naming the old one. kube-controller-manager's garbage collector deletes such dangling
// dependents within seconds (a plain Secret of the same owner goes), but not these (the
// captf-state-protection admission policy refuses it), and the manager's next reconcile makes
// the live object the owner of every one of them, without running a Job.
func TestOwnerRepairRestoredSecrets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, kubelet := scenario(t)

	tc := newTerraformCluster(t, ns, "c", func(o *captfv1.TerraformCluster) {
		o.Spec.DeletionPolicy = captfv1.DeletionPolicyRetain // the first incarnation leaves its Secrets behind
	})
	waitFor(t, tc, 2*time.Minute, "provisioned and backed up", func(o *captfv1.TerraformCluster) bool {
		return provisioned(o.Status.Initialization) && len(o.Status.StateBackups) > 0
	})
	old, err := jobs.OwnerOf(tc, "c")
	g.Expect(err).NotTo(HaveOccurred())
	backup := restorable(t, old)
	kinds := map[string]bool{}
	for _, s := range backup {
		g.Expect(s.OwnerReferences).To(ContainElement(HaveField("UID", tc.UID)), "Secret %s", s.Name)
		switch {
		case s.Labels[captfv1.StateBackupLabel] == "true":
			kinds["backup"] = true
		case s.Labels[contract.BackendStateLabel] == "true":
			kinds["state"] = true
		case strings.HasPrefix(s.Name, "captf-inputs-"):
			kinds["inputs"] = true
		case strings.HasPrefix(s.Name, "captf-plankey-"):
			kinds["plankey"] = true
		}
	}
	g.Expect(kinds).To(HaveLen(4), "state, backup, durable inputs and plan key")

	// The disaster: the object and its Secrets are gone (Retain let the object go; the retained
	// Secrets are deleted by hand).
	g.Expect(env.Client.Delete(ctx, tc)).To(Succeed())
	gone(t, tc, time.Minute)
	for _, s := range keptSecrets(t, old) {
		g.Expect(env.Client.Delete(ctx, &s)).To(Succeed())
	}

	// The restore: the object comes back with a new UID (paused, so the garbage collector gets
	// its chance before the first reconcile), then its Secrets as they were backed up.
	cluster := &clusterv1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c"}, cluster)).To(Succeed())
	again := testenv.TerraformCluster(ns, "c", "c", clusterImage)
	ownedBy(again, cluster, "Cluster")
	again.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	create(t, again)
	g.Expect(again.UID).NotTo(Equal(tc.UID))
	control := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unprotected-dependent",
		OwnerReferences: backup[0].OwnerReferences}}
	create(t, control)
	for _, s := range backup {
		create(t, asRestored(s))
	}

	// The garbage collector runs: it takes the unprotected Secret of the same dangling owner
	// and is refused the others.
	gone(t, control, time.Minute)
	g.Eventually(env.ControllerManagerLog, 30*time.Second, 200*time.Millisecond).Should(
		ContainSubstring("CAPTF keeps Secret "+contract.StateSecretName(old.StateSuffix())),
		"the garbage collector tried to delete the restored state")
	for _, s := range backup {
		have := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&s), have)).To(Succeed(), "Secret %s survives", s.Name)
		g.Expect(have.DeletionTimestamp).To(BeNil(), "Secret %s", s.Name)
	}

	// Unpaused, the manager re-owns every one of them.
	pods := kubelet.Started()
	annotate(t, again, clusterv1.PausedAnnotation, nil)
	g.Eventually(func(g Gomega) {
		for _, s := range backup {
			have := &corev1.Secret{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&s), have)).To(Succeed(), "Secret %s", s.Name)
			g.Expect(ownerUIDs(have)).To(Equal([]types.UID{again.UID}), "Secret %s", s.Name)
		}
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	waitFor(t, again, time.Minute, "provisioned from the restored state", func(o *captfv1.TerraformCluster) bool {
		return provisioned(o.Status.Initialization) && hasCondition(o, captfv1.StateReadableCondition, metav1.ConditionTrue, captfv1.StateReadReason)
	})
	g.Expect(kubelet.Started()).To(Equal(pods), "no Job ran")

	// Owned by the live object now, they stay when the garbage collector looks again.
	never(t, 3*time.Second, "a restored Secret was deleted", func() bool {
		for _, s := range backup {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&s), &corev1.Secret{}); apierrors.IsNotFound(err) {
				return true
			}
		}
		return false
	})
}

func ownerUIDs(o client.Object) []types.UID {
	var uids []types.UID
	for _, r := range o.GetOwnerReferences() {
		uids = append(uids, r.UID)
	}
	return uids
}
