package controllers_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/planhash"
	"github.com/capx-io/capx/internal/captf/planview"
	"github.com/capx-io/capx/internal/captf/savedplan"
	"github.com/capx-io/capx/internal/cli/captf/plan/show"
	"github.com/capx-io/capx/internal/cli/captf/status"
)

// savedPlanSecrets reads a TerraformPlan's saved plan Secrets in chunk order.
func savedPlanSecrets(t *testing.T, ns, plan string) []*corev1.Secret {
	t.Helper()
	ctx := context.Background()
	first := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: savedplan.SecretName(plan)}, first); err != nil {
		t.Fatalf("saved plan of %s: %v", plan, err)
	}
	n, err := savedplan.Chunks(first)
	if err != nil {
		t.Fatal(err)
	}
	out := []*corev1.Secret{first}
	for i := 1; i < n; i++ {
		s := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: savedplan.ChunkName(plan, i)}, s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// TestApprovalAppliesTheSavedPlan: the manager records a plan from the saved plan its Job
// stored (owned by the TerraformPlan, moving with it), hashed with the object's key and bound
// to the state the plan was made against and its inputs; no Job is given the key; the approved
// apply is given exactly that saved plan and applies it. A saved plan replaced after the
// approval is refused by the manager: the apply applies nothing, the approved plan fails, and
// the new plan waits for an approval of its own.
func TestApprovalAppliesTheSavedPlan(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := scenario(t)
	const kind = captfv1.KindCluster
	settings := map[string]any{"failure_domains": []string{"fd-a"}}
	tc := newManualCluster(t, ns, settings)
	pending := func(not string) *captfv1.TerraformPlan {
		t.Helper()
		waitFor(t, tc, 2*time.Minute, "a plan awaiting approval", func(o *captfv1.TerraformCluster) bool {
			return o.Status.PendingPlanRef != nil && o.Status.PendingPlanRef.Name != not && o.Status.ActiveJob == nil
		})
		tp := &captfv1.TerraformPlan{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.Status.PendingPlanRef.Name}, tp)).To(Succeed())
		return tp
	}

	// The recorded plan and its saved plan.
	settings["failure_domains"] = []string{"fd-a", "fd-b"}
	update(t, tc, func(o *captfv1.TerraformCluster) { o.Spec.Variables = vars(settings) })
	first := pending("")
	secrets := savedPlanSecrets(t, ns, first.Name)
	for _, s := range secrets {
		g.Expect(metav1.GetControllerOf(s)).NotTo(BeNil())
		g.Expect(metav1.GetControllerOf(s).UID).To(Equal(first.UID), "the TerraformPlan controls its saved plan")
		g.Expect(s.Labels).To(HaveKey("clusterctl.cluster.x-k8s.io/move"))
	}
	b, _, err := savedplan.Decode(first.Name, secrets)
	g.Expect(err).NotTo(HaveOccurred())
	prior, err := savedplan.PriorState(b.PlanFile)
	g.Expect(err).NotTo(HaveOccurred())
	st := readState(t, ns, kind, "c1")
	g.Expect(prior).To(Equal(savedplan.Prior{Lineage: st.Lineage, Serial: st.Serial}), "planned against the current state")
	key := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "captf-plankey-c-c1"}, key)).To(Succeed())
	plan, err := planhash.Parse(b.Plan)
	g.Expect(err).NotTo(HaveOccurred())
	want, err := planhash.Fingerprint(key.Data["key"], plan, planhash.Binding{
		Lineage: prior.Lineage, Serial: prior.Serial, InputsHash: first.Spec.InputsHash, PlanFile: b.PlanFileDigest(), View: first.Spec.ViewDigest})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.Spec.PlanHash).To(Equal(want), "the manager's hash binds the changes, the state, the inputs, the plan file and the view")

	// The readable changes the Job stored are published as TerraformPlanViews the plan controls
	// and an approver may read without any Secret right; the Job's Secrets go. The plan records
	// their digest (immutable, bound into the hash): plan show refuses a view rewritten since.
	g.Expect(first.Spec.ViewDigest).To(HaveLen(64))
	published := &captfv1.TerraformPlanView{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: planview.SecretName(first.Name)}, published)).To(Succeed())
	g.Expect(metav1.IsControlledBy(published, first)).To(BeTrue())
	g.Expect(published.Labels).To(HaveKey("clusterctl.cluster.x-k8s.io/move"))
	g.Expect(published.Digest).To(Equal(first.Spec.ViewDigest))
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: planview.SecretName(first.Name)}, &corev1.Secret{}))).
		To(BeTrue(), "the Job's view Secrets are deleted once published")
	approverClient := asApprover(t, ns)
	shown := show.Load(ctx, approverClient, first)
	g.Expect(shown.ViewAvailable).To(BeTrue(), "the approver role alone reads the full view: %s", shown.ViewProblem)
	g.Expect(shown.ValuesWithheld).To(BeFalse())
	g.Expect(shown.Changes).NotTo(BeEmpty())
	tree, err := status.Gather(ctx, approverClient, ns, "")
	g.Expect(err).NotTo(HaveOccurred(), "kubectl captf status works with the approver role alone")
	g.Expect(tree.Clusters).NotTo(BeEmpty())
	benign, _, err := planview.Publish(&planview.View{FormatVersion: planview.FormatVersion}, first.Name, ns, published.Labels)
	g.Expect(err).NotTo(HaveOccurred())
	benign[0].ResourceVersion, benign[0].OwnerReferences = published.ResourceVersion, published.OwnerReferences
	g.Expect(env.Client.Update(ctx, benign[0])).To(Succeed(), "an administrator may; nobody else can")
	shown = show.Load(ctx, approverClient, first)
	g.Expect(shown.ViewAvailable).To(BeFalse())
	g.Expect(shown.ViewProblem).To(ContainSubstring("it was rewritten since"))

	// Replaced after the approval (by anything that can write Secrets in the namespace): a plan
	// file with the same document but other bytes no longer hashes to the approved hash.
	forged := &savedplan.Bundle{PlanFile: append(slices.Clone(b.PlanFile), 0), Plan: b.Plan}
	replacement, err := savedplan.Encode(forged, first.Name, ns, secrets[0].Labels)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(replacement).To(HaveLen(len(secrets)))
	for i, s := range replacement {
		s.ResourceVersion, s.OwnerReferences = secrets[i].ResourceVersion, secrets[i].OwnerReferences
		g.Expect(env.Client.Update(ctx, s)).To(Succeed())
	}
	serial := st.Serial
	approve(t, first, "alice")
	second := pending(first.Name)
	g.Expect(readState(t, ns, kind, "c1").Serial).To(Equal(serial), "nothing was applied")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(first), first)).To(Succeed())
	g.Expect(first.Status.Phase).To(Equal(captfv1.PlanFailed))
	g.Expect(second.Spec.PlanHash).NotTo(Equal(first.Spec.PlanHash), "planned against the same state, but by another Job: another plan file")
	g.Expect(eventReasons(t, ns, "c1")).To(ContainElement("SavedPlanRejected"))

	// Approved, the new plan applies through its own saved plan.
	approve(t, second, "alice")
	waitFor(t, tc, 2*time.Minute, "the approved plan applied", func(o *captfv1.TerraformCluster) bool {
		return o.Status.ActiveJob == nil && o.Status.PendingPlanRef == nil && len(o.Status.FailureDomains) == 2
	})
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(second), second)).To(Succeed())
	g.Expect(second.Status.Phase).To(Equal(captfv1.PlanApplied))
	approved := 0
	for _, j := range jobsOf(t, ns, kind, "c1") {
		pod := j.Spec.Template.Spec
		for _, v := range pod.Volumes {
			g.Expect(v.Name).NotTo(Equal("plan-key"), "no Job mounts the plan key")
			if v.Secret != nil {
				g.Expect(v.Secret.SecretName).NotTo(HavePrefix("captf-plankey-"))
			}
		}
		args := strings.Join(pod.Containers[0].Args, " ")
		g.Expect(args).NotTo(ContainSubstring("plan-key"))
		if j.Annotations[captfv1.PlanAnnotation] == second.Name {
			approved++
			g.Expect(args).To(ContainSubstring("--expect-plan=" + second.Spec.PlanHash))
			g.Expect(args).To(ContainSubstring("--saved-plan-chunks="))
		}
		if j.Annotations[captfv1.PlanAnnotation] == first.Name {
			g.Expect(args).NotTo(ContainSubstring("--saved-plan-chunks="), "the replaced saved plan is not given to the apply")
		}
	}
	g.Expect(approved).To(Equal(1))
}

// eventReasons lists the reasons of the Events about an object.
func eventReasons(t *testing.T, ns, name string) []string {
	t.Helper()
	list := &corev1.EventList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}

// TestApprovalRefusedWhenTheStateMovedOn: the state is written again (another serial, the same
// resources: what a refresh leaves) between the plan and its approved apply. The plan made
// again makes the same changes, so OpenTofu itself refuses the approved saved plan as stale:
// nothing is applied, the approved plan fails with PlanChanged, and the new plan, made against
// the new serial, waits for its own approval.
func TestApprovalRefusedWhenTheStateMovedOn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := scenario(t)
	const kind = captfv1.KindCluster
	tc := newPendingChange(t, ns)
	first := &captfv1.TerraformPlan{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.Status.PendingPlanRef.Name}, first)).To(Succeed())

	// The state moves on: the same contents under the next serial.
	moved := moveStateOn(t, ns, kind, "c1")

	approve(t, first, "alice")
	waitFor(t, tc, 2*time.Minute, "a new plan after the refusal", func(o *captfv1.TerraformCluster) bool {
		return o.Status.PendingPlanRef != nil && o.Status.PendingPlanRef.Name != first.Name && o.Status.ActiveJob == nil
	})
	g.Expect(tc.Status.LastRun).NotTo(BeNil())
	g.Expect(tc.Status.LastRun.Result).To(Equal(captfv1.RunPlanChanged))
	g.Expect(tc.Status.LastRun.Error).NotTo(BeNil())
	g.Expect(tc.Status.LastRun.Error.Summary).To(ContainSubstring("OpenTofu refused its saved plan as stale"))
	g.Expect(readState(t, ns, kind, "c1").Serial).To(Equal(moved), "nothing was applied")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(first), first)).To(Succeed())
	g.Expect(first.Status.Phase).To(Equal(captfv1.PlanFailed))
	second := &captfv1.TerraformPlan{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.Status.PendingPlanRef.Name}, second)).To(Succeed())
	b, _, err := savedplan.Decode(second.Name, savedPlanSecrets(t, ns, second.Name))
	g.Expect(err).NotTo(HaveOccurred())
	prior, err := savedplan.PriorState(b.PlanFile)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(prior.Serial).To(Equal(moved), "the new plan is bound to the new serial")
}
