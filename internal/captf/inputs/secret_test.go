package inputs

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/testenv"
)

// machineSource is a machine's Source for a real TerraformMachine in ns.
func machineSource(t *testing.T, ns string) Source {
	t.Helper()
	tm := testenv.TerraformMachine(ns, "m1", "c1", "example.com/module:v1")
	if err := env.Client.Create(context.Background(), tm); err != nil {
		t.Fatal(err)
	}
	owner, err := jobs.OwnerOf(tm, "c1")
	if err != nil {
		t.Fatal(err)
	}
	src := sources()[contract.RoleMachine]
	src.Owner, src.Object = owner, tm
	return src
}

func TestEnsureWritesOnlyWhatChanged(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t)
	c, w := countingClient(t)
	src := machineSource(t, ns)
	r, err := Render(src)
	g.Expect(err).NotTo(HaveOccurred())
	name := "captf-inputs-m-m1"

	wrote, err := Ensure(ctx, c, src.Owner, r)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wrote).To(BeTrue())
	g.Expect(w.take()).To(Equal([]string{"create " + name}))

	s := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
	g.Expect(s.Labels).To(Equal(map[string]string{
		"captf.io/managed": "true",
		"captf.infrastructure.cluster.x-k8s.io/owner-kind": "TerraformMachine",
		"captf.infrastructure.cluster.x-k8s.io/owner-name": "m1",
		"cluster.x-k8s.io/cluster-name":                    "c1",
		"clusterctl.cluster.x-k8s.io/move":                 "",
	}))
	g.Expect(s.Annotations).To(Equal(map[string]string{"captf.io/inputs-hash": r.Hash}))
	g.Expect(s.OwnerReferences).To(ConsistOf(metav1.OwnerReference{
		APIVersion: "infrastructure.cluster.x-k8s.io/v1alpha1", Kind: "TerraformMachine", Name: "m1", UID: src.Owner.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}))
	g.Expect(s.Data).To(Equal(map[string][]byte{"main.tf.json": r.MainTF, "terraform.tfvars.json": r.TFVars}))

	// A second reconcile with the same inputs, or with only metadata changed, writes nothing.
	src.Object.SetLabels(map[string]string{"new": "label"})
	src.Object.SetAnnotations(map[string]string{"note": "x"})
	again, err := Render(src)
	g.Expect(err).NotTo(HaveOccurred())
	wrote, err = Ensure(ctx, c, src.Owner, again)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wrote).To(BeFalse())
	g.Expect(w.take()).To(BeEmpty())

	// The applied marker is written once and survives later inputs.
	g.Expect(MarkApplied(ctx, c, src.Owner)).To(BeTrue())
	g.Expect(MarkApplied(ctx, c, src.Owner)).To(BeFalse())
	g.Expect(w.take()).To(Equal([]string{"patch " + name}))

	src.Variables.Values["slow"] = json.RawMessage(`5`)
	changed, err := Render(src)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(Ensure(ctx, c, src.Owner, changed)).To(BeTrue())
	g.Expect(w.take()).To(Equal([]string{"update " + name}))

	stored, err := Read(ctx, env.Client, src.Owner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored.Applied).To(BeTrue())
	g.Expect(stored.Hash).To(Equal(changed.Hash), "Read recomputes the hash from the stored values")
	g.Expect(stored.MainTF).To(Equal(changed.MainTF))
	g.Expect(stored.TFVars).To(Equal(changed.TFVars))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
	g.Expect(s.Annotations).To(HaveKeyWithValue("captf.io/applied", "true"))
	g.Expect(s.Annotations).To(HaveKeyWithValue("captf.io/inputs-hash", changed.Hash))
}

func TestEnsureKeepsOthersAndRepairsOwner(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t)
	src := machineSource(t, ns)
	r, err := Render(src)
	g.Expect(err).NotTo(HaveOccurred())

	// As after a management cluster restore: the Secret points at an earlier UID of the
	// object and holds a key another package wrote.
	stale := Secret(src.Owner, r)
	stale.OwnerReferences[0].UID = "earlier-uid"
	stale.Data["applied-cluster-outputs.json"] = []byte(`{}`)
	stale.Annotations[captfv1.AppliedAnnotation] = "true"
	g.Expect(env.Client.Create(ctx, stale)).To(Succeed())

	g.Expect(Ensure(ctx, env.Client, src.Owner, r)).To(BeTrue())
	s := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stale), s)).To(Succeed())
	g.Expect(s.OwnerReferences).To(HaveLen(1))
	g.Expect(s.OwnerReferences[0].UID).To(Equal(src.Owner.UID))
	g.Expect(s.Data).To(HaveKey("applied-cluster-outputs.json"))
	g.Expect(s.Annotations).To(HaveKeyWithValue(captfv1.AppliedAnnotation, "true"))
	g.Expect(Ensure(ctx, env.Client, src.Owner, r)).To(BeFalse())

	// A Secret some other controller owns is never taken over.
	other := src.Owner
	other.Name = "m2"
	foreign := Secret(other, r)
	foreign.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "x", Controller: ptr.To(true),
	}}
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())
	_, err = Ensure(ctx, env.Client, other, r)
	g.Expect(err).To(MatchError(ContainSubstring("is controlled by ConfigMap x, not by TerraformMachine m2")))
}

func TestReadAndMarkAppliedWithoutSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t)
	owner := jobs.Owner{Kind: captfv1.KindCluster, Namespace: ns, Name: "gone"}
	_, err := Read(ctx, env.Client, owner)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	_, err = MarkApplied(ctx, env.Client, owner)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
}

func TestRunSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t)
	c, w := countingClient(t)
	src := machineSource(t, ns)
	r, err := Render(src)
	g.Expect(err).NotTo(HaveOccurred())

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "captf-m-m1-apply-a1-abcdef", Labels: src.Owner.Labels()},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "example.com/x:v1"}},
		}}},
	}
	g.Expect(env.Client.Create(ctx, job)).To(Succeed())

	g.Expect(EnsureRun(ctx, c, job, r)).To(BeTrue())
	g.Expect(EnsureRun(ctx, c, job, r)).To(BeFalse(), "a retry after a crash writes nothing")
	g.Expect(w.take()).To(Equal([]string{"create captf-run-captf-m-m1-apply-a1-abcdef"}))

	s := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "captf-run-" + job.Name}, s)).To(Succeed())
	g.Expect(s.OwnerReferences).To(ConsistOf(metav1.OwnerReference{
		APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}))
	g.Expect(s.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, "c1"))
	g.Expect(s.Labels).NotTo(HaveKey("clusterctl.cluster.x-k8s.io/move"), "a run's Secret does not move; its Job does not either")
	g.Expect(s.Data).To(Equal(r.Data()))

	// Another Job of the same name (a stale Secret from a deleted one) is refused.
	job.UID = "other"
	_, err = EnsureRun(ctx, c, job, r)
	g.Expect(err).To(MatchError(ContainSubstring("is not owned by Job")))
}
