package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/inputs"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/state"
	"github.com/capx-io/capx/internal/testenv"
)

// keptSecrets lists what deletionPolicy Retain keeps of an object: its state chunks, its
// backups and its durable inputs Secret.
func keptSecrets(t *testing.T, owner jobs.Owner) []corev1.Secret {
	t.Helper()
	ctx := context.Background()
	var out []corev1.Secret
	for _, sel := range []client.MatchingLabels{state.Selector(owner.StateSuffix()), state.BackupSelector(owner.StateSuffix())} {
		list := &corev1.SecretList{}
		if err := env.Client.List(ctx, list, client.InNamespace(owner.Namespace), sel); err != nil {
			t.Fatal(err)
		}
		out = append(out, list.Items...)
	}
	in := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: owner.Namespace, Name: inputs.SecretName(owner)}, in); err == nil {
		out = append(out, *in)
	}
	return out
}

// TestRetain: deleting an object with deletionPolicy Retain runs no destroy Job and removes the
// finalizer, keeping its state, backups and durable inputs without owner references (so the
// garbage collector leaves them) and labelled with its UID. A new object of the same name finds
// that state, holds with StateReadable=False/RetainedStateFound and never applies over it.
func TestRetain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, kubelet := scenario(t)
	newForeignCluster(t, ns, "c")

	tm := newTerraformMachine(t, ns, "c", "m1", func(o *captfv1.TerraformMachine) {
		o.Spec.DeletionPolicy = captfv1.DeletionPolicyRetain
	})
	waitFor(t, tm, 2*time.Minute, "provisioned and backed up", func(o *captfv1.TerraformMachine) bool {
		return provisioned(o.Status.Initialization) && len(o.Status.StateBackups) > 0
	})
	owner, err := jobs.OwnerOf(tm, "c")
	g.Expect(err).NotTo(HaveOccurred())
	applied := readState(t, ns, captfv1.KindMachine, "m1")
	kinds := func(secrets []corev1.Secret) map[string]int {
		n := map[string]int{}
		for _, s := range secrets {
			switch {
			case s.Labels[captfv1.StateBackupLabel] == "true":
				n["backup"]++
			case s.Name == inputs.SecretName(owner):
				n["inputs"]++
			default:
				n["state"]++
			}
		}
		return n
	}
	before := kinds(keptSecrets(t, owner))
	g.Expect(before).To(HaveKey("backup"))
	g.Expect(before).To(HaveKeyWithValue("inputs", 1))
	g.Expect(before).To(HaveKeyWithValue("state", 1))

	g.Expect(env.Client.Delete(ctx, tm)).To(Succeed())
	gone(t, tm, time.Minute)
	g.Expect(kubelet.Log.String()).NotTo(ContainSubstring("captf-m-m1-destroy"), "no destroy Job ran")
	// The garbage collector had time to remove anything still owned by the deleted object.
	time.Sleep(3 * time.Second)
	kept := keptSecrets(t, owner)
	g.Expect(kinds(kept)).To(Equal(before), "the state, backups and durable inputs are all kept")
	for _, s := range kept {
		g.Expect(s.OwnerReferences).To(BeEmpty(), "Secret %s", s.Name)
		g.Expect(s.Labels).To(HaveKeyWithValue(captfv1.RetainedFromUIDLabel, string(owner.UID)), "Secret %s", s.Name)
	}
	g.Expect(readState(t, ns, captfv1.KindMachine, "m1").Digest).To(Equal(applied.Digest))

	// A new TerraformMachine of the same name (its Machine still points at that name) holds.
	pods := kubelet.Started()
	machine := &clusterv1.Machine{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "m1"}, machine)).To(Succeed())
	again := testenv.TerraformMachine(ns, "m1", "c", machineImage)
	ownedBy(again, machine, "Machine")
	create(t, again)
	waitFor(t, again, time.Minute, "holding on the retained state", func(o *captfv1.TerraformMachine) bool {
		return hasCondition(o, captfv1.StateReadableCondition, metav1.ConditionFalse, captfv1.RetainedStateFoundReason)
	})
	g.Expect(describe(again)).To(ContainSubstring(string(owner.UID)))
	never(t, 5*time.Second, "a Job ran over the retained state", func() bool { return kubelet.Started() > pods })
	g.Expect(readState(t, ns, captfv1.KindMachine, "m1").Digest).To(Equal(applied.Digest), "the retained state is untouched")

	// Told to, the new object adopts it: owner references and no retained-from label on every
	// Secret, provisioned from the state alone, and still no Job (the machine was applied).
	patch := []byte(`{"metadata":{"annotations":{"` + captfv1.AdoptRetainedStateAnnotation + `":"` + string(owner.UID) + `"}}}`)
	g.Expect(env.Client.Patch(ctx, again, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
	waitFor(t, again, time.Minute, "provisioned from the adopted state", func(o *captfv1.TerraformMachine) bool {
		return provisioned(o.Status.Initialization) && hasCondition(o, captfv1.StateReadableCondition, metav1.ConditionTrue, captfv1.StateReadReason)
	})
	newOwner, err := jobs.OwnerOf(again, "c")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		adopted := keptSecrets(t, newOwner)
		g.Expect(kinds(adopted)).To(Equal(before), "the state, backups and durable inputs")
		for _, s := range adopted {
			g.Expect(s.OwnerReferences).To(ContainElement(HaveField("UID", again.UID)), "Secret %s", s.Name)
			g.Expect(s.Labels).NotTo(HaveKey(captfv1.RetainedFromUIDLabel), "Secret %s", s.Name)
		}
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	g.Expect(again.Spec.ProviderID).NotTo(BeEmpty())
	never(t, 3*time.Second, "a Job ran over the adopted state", func() bool { return kubelet.Started() > pods })
	g.Expect(readState(t, ns, captfv1.KindMachine, "m1").Digest).To(Equal(applied.Digest), "the adopted state is untouched")
}
