package controllers_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/inputs"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/testenv"
)

// The test pool module replaces its terraform_data.attachment when the cluster's exports name
// another pool_attachment (a destructive exports change), and fails after changing its group
// when they set pool_fail = "true" (an apply that stops midway).

// newPool creates a bootstrap Secret, a MachinePool of the cluster and its TerraformMachinePool,
// with edits applied before the TerraformMachinePool is created.
func newPool(t *testing.T, ns, cluster, name string, replicas int32, edits ...func(*captfv1.TerraformMachinePool)) (*clusterv1.MachinePool, *captfv1.TerraformMachinePool) {
	t.Helper()
	create(t, testenv.BootstrapSecret(ns, name+"-bootstrap", cluster, "#cloud-config\n"))
	mp := testenv.MachinePool(ns, name, cluster, "TerraformMachinePool", name, name+"-bootstrap", replicas)
	create(t, mp)
	tmp := testenv.TerraformMachinePool(ns, name, cluster, poolImage)
	ownedBy(tmp, mp, "MachinePool")
	for _, edit := range edits {
		edit(tmp)
	}
	create(t, tmp)
	return mp, tmp
}

// setExports sets the cluster module's extra exports.
func setExports(t *testing.T, tc *captfv1.TerraformCluster, extra map[string]string) {
	t.Helper()
	update(t, tc, func(o *captfv1.TerraformCluster) {
		o.Spec.Variables = vars(map[string]any{"exports_extra": extra})
	})
}

func scalePool(t *testing.T, mp *clusterv1.MachinePool, replicas int32) {
	t.Helper()
	update(t, mp, func(o *clusterv1.MachinePool) { o.Spec.Replicas = ptr.To(replicas) })
}

// exportsRecord reads a pool's durable inputs Secret: the record's state and the exports it
// keeps (nil when none), and the cluster exports its current inputs carry.
func exportsRecord(t *testing.T, ns, pool string) (status string, kept, rendered map[string]any) {
	t.Helper()
	s := &corev1.Secret{}
	o := jobs.Owner{Kind: captfv1.KindMachinePool, Namespace: ns, Name: pool}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: inputs.SecretName(o)}, s); err != nil {
		t.Fatalf("read the durable inputs of %s: %v", pool, err)
	}
	if raw, ok := s.Data[inputs.AppliedExportsKey]; ok {
		if err := json.Unmarshal(raw, &kept); err != nil {
			t.Fatal(err)
		}
	}
	out, err := inputs.ClusterOutputs(s.Data[contract.VarsFile])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &rendered); err != nil {
		t.Fatal(err)
	}
	return s.Annotations[captfv1.ExportsRecordAnnotation], kept, rendered
}

// pendingPlan is the pool's one Pending TerraformPlan (nil when there is none).
func pendingPlan(t *testing.T, ns, pool string) *captfv1.TerraformPlan {
	t.Helper()
	var found *captfv1.TerraformPlan
	for _, tp := range plansOf(t, ns) {
		if tp.Spec.TargetRef.Name == pool && tp.Labels[captfv1.PlanPhaseLabel] == string(captfv1.PlanPending) {
			if found != nil {
				t.Fatalf("two pending plans for %s: %s and %s", pool, found.Name, tp.Name)
			}
			found = tp.DeepCopy()
		}
	}
	return found
}

func exportsHeld(o *captfv1.TerraformMachinePool) bool {
	return hasCondition(o, captfv1.ClusterExportsCurrentCondition, metav1.ConditionFalse, captfv1.ExportsChangeHeldReason)
}

// TestPoolExportsHeld: a destructive change of the cluster's exports is held. Its TerraformPlan
// waits for approval while the pool keeps applying with the exports of its last successful
// apply: a scale-up goes through with the old exports and the attachment they name is not
// replaced. The approval binds the state's serial, which the held scale-up moved on: its apply
// plans again and the new plan is held the same way. The pool's membership refresh (every 15 s
// here) keeps running and writes nothing, so the new plan, approved after a refresh, applies the
// new exports. A clusterctl move of a pool with a held change plans and applies nothing again;
// approved after the move with the state moved on, its apply plans again, that plan waits under
// a name of its own (not the moved plan's: the Jobs that made the plans stayed behind) and,
// approved, applies.
func TestPoolExportsHeld(t *testing.T) {
	g := NewWithT(t)
	ns, _ := scenario(t)
	tc := newTerraformCluster(t, ns, "c", func(o *captfv1.TerraformCluster) {
		o.Spec.Variables = vars(map[string]any{"exports_extra": map[string]string{"pool_attachment": "a1"}})
	})
	// The shortest membership refresh interval: refreshes run between the steps below.
	mp, tmp := newPool(t, ns, "c", "workers", 2, func(o *captfv1.TerraformMachinePool) {
		o.Spec.MembershipRefreshIntervalSeconds = ptr.To[int32](15)
	})
	waitFor(t, tmp, 3*time.Minute, "provisioned with 2 instances and the exports recorded", func(o *captfv1.TerraformMachinePool) bool {
		return provisioned(o.Status.Initialization) && o.Status.Replicas == 2 &&
			hasCondition(o, captfv1.ClusterExportsCurrentCondition, metav1.ConditionTrue, captfv1.ExportsAppliedReason)
	})
	status, kept, _ := exportsRecord(t, ns, "workers")
	g.Expect(status).To(Equal(inputs.ExportsKept))
	g.Expect(kept).To(HaveKeyWithValue("pool_attachment", "a1"))
	attachment := attachmentID(t, ns, "workers")

	// The cluster's exports name another attachment: the pool's plan replaces it and is held.
	setExports(t, tc, map[string]string{"pool_attachment": "a2"})
	waitFor(t, tmp, 3*time.Minute, "the exports change held", func(o *captfv1.TerraformMachinePool) bool {
		return exportsHeld(o) && o.Status.PendingPlanRef != nil && o.Status.ActiveJob == nil
	})
	plan := pendingPlan(t, ns, "workers")
	g.Expect(plan).NotTo(BeNil())
	g.Expect(plan.Spec.Reason).To(Equal(captfv1.PlanReasonDestructive))
	g.Expect(tmp.Status.PendingPlanRef.Name).To(Equal(plan.Name))
	g.Expect(conditions.GetMessage(tmp, captfv1.ClusterExportsCurrentCondition)).To(ContainSubstring("kubectl captf approve " + plan.Name + " -n " + ns))

	// The held pool still scales: 2 -> 3 with the exports of its last apply.
	scalePool(t, mp, 3)
	waitFor(t, tmp, 3*time.Minute, "scaled to 3 while held", func(o *captfv1.TerraformMachinePool) bool {
		return o.Status.Replicas == 3 && len(o.Spec.ProviderIDList) == 3 && exportsHeld(o) && o.Status.ActiveJob == nil &&
			hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionTrue, captfv1.ApplySucceededReason)
	})
	g.Expect(attachmentID(t, ns, "workers")).To(Equal(attachment), "the held change replaced nothing")
	status, kept, rendered := exportsRecord(t, ns, "workers")
	g.Expect(status).To(Equal(inputs.ExportsKept))
	g.Expect(kept).To(HaveKeyWithValue("pool_attachment", "a1"))
	g.Expect(rendered).To(HaveKeyWithValue("pool_attachment", "a1"), "the applied inputs carry the recorded exports")
	plan = pendingPlan(t, ns, "workers")
	g.Expect(plan).NotTo(BeNil(), "the change at 3 replicas waits as a plan")
	g.Expect(tmp.Status.PendingPlanRef).To(Equal(&corev1.LocalObjectReference{Name: plan.Name}))

	// The plan was made before the held scale-up moved the state's serial on: its approved apply
	// plans again, applies nothing, and the new plan is held the same way.
	approve(t, plan, "alice")
	waitFor(t, tmp, 3*time.Minute, "the overtaken plan planned again, still held", func(o *captfv1.TerraformMachinePool) bool {
		return exportsHeld(o) && o.Status.PendingPlanRef != nil && o.Status.PendingPlanRef.Name != plan.Name && o.Status.ActiveJob == nil
	})
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(plan), plan)).To(Succeed())
	g.Expect(plan.Labels[captfv1.PlanPhaseLabel]).To(Equal(string(captfv1.PlanFailed)))
	g.Expect(attachmentID(t, ns, "workers")).To(Equal(attachment), "nothing applied the overtaken plan")
	plan = pendingPlan(t, ns, "workers")
	g.Expect(plan).NotTo(BeNil())
	g.Expect(tmp.Status.PendingPlanRef.Name).To(Equal(plan.Name))

	// A membership refresh runs while the plan waits: it finds nothing to record and writes no
	// state, so the serial the plan is bound to stays and the plan stays approvable.
	serial := readState(t, ns, captfv1.KindMachinePool, "workers").Serial
	refreshedAfter(t, ns, "workers", plan.CreationTimestamp.Time)
	g.Expect(readState(t, ns, captfv1.KindMachinePool, "workers").Serial).To(Equal(serial), "the refresh wrote the state")

	// Approved, the new plan applies: the attachment is replaced and the exports are current.
	approve(t, plan, "alice")
	waitFor(t, tmp, 3*time.Minute, "the approved exports applied", func(o *captfv1.TerraformMachinePool) bool {
		return hasCondition(o, captfv1.ClusterExportsCurrentCondition, metav1.ConditionTrue, captfv1.ExportsAppliedReason) &&
			o.Status.ActiveJob == nil && o.Status.PendingPlanRef == nil
	})
	attachment2 := attachmentID(t, ns, "workers")
	g.Expect(attachment2).NotTo(Equal(attachment))
	status, kept, _ = exportsRecord(t, ns, "workers")
	g.Expect(status).To(Equal(inputs.ExportsKept))
	g.Expect(kept).To(HaveKeyWithValue("pool_attachment", "a2"))
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(plan), plan)).To(Succeed())
	g.Expect(plan.Labels[captfv1.PlanPhaseLabel]).To(Equal(string(captfv1.PlanApplied)))
	g.Expect(tmp.Status.Replicas).To(BeEquivalentTo(3))

	// Held again, then clusterctl move: status wiped, Jobs left behind, the pool and its plan
	// re-created with new UIDs. Nothing is planned or applied again, and the change stays held
	// (the membership refresh that a pool runs after a move reads; it changes no resource).
	setExports(t, tc, map[string]string{"pool_attachment": "a3"})
	waitFor(t, tmp, 3*time.Minute, "the next exports change held", func(o *captfv1.TerraformMachinePool) bool {
		return exportsHeld(o) && o.Status.PendingPlanRef != nil && o.Status.ActiveJob == nil
	})
	plan = pendingPlan(t, ns, "workers")
	g.Expect(plan).NotTo(BeNil())
	// The stopped apply stored its inputs; the durable ones (a destroy's) are the applied ones again.
	g.Eventually(func() map[string]any {
		_, _, rendered := exportsRecord(t, ns, "workers")
		return rendered
	}, 30*time.Second, 200*time.Millisecond).Should(HaveKeyWithValue("pool_attachment", "a2"))
	moved := simulateMove(t, ns, "c", tmp)
	waitFor(t, moved, 2*time.Minute, "the moved pool held again, from what moved", func(o *captfv1.TerraformMachinePool) bool {
		return exportsHeld(o) && o.Status.PendingPlanRef != nil && provisioned(o.Status.Initialization) && o.Status.Replicas == 3
	})
	never(t, 5*time.Second, "an apply or plan ran after the move", func() bool {
		return countJobs(t, ns, captfv1.KindMachinePool, "workers", captfv1.OperationApply)+
			countJobs(t, ns, captfv1.KindMachinePool, "workers", captfv1.OperationPlan) > 0
	})
	g.Expect(moved.Status.PendingPlanRef.Name).To(Equal(plan.Name))
	g.Expect(pendingPlan(t, ns, "workers").Name).To(Equal(plan.Name))
	g.Expect(attachmentID(t, ns, "workers")).To(Equal(attachment2))

	// The state moves on before the approval (as a refresh that found something would): the
	// approved apply plans again and applies nothing. Its Job is the first apply of these inputs
	// the moved pool can see, like the one that made the moved plan: its plan still waits under
	// a name of its own, and applies once approved.
	movedOn := moveStateOn(t, ns, captfv1.KindMachinePool, "workers")
	approve(t, plan, "alice")
	waitFor(t, moved, 3*time.Minute, "the moved plan planned again, the new plan held", func(o *captfv1.TerraformMachinePool) bool {
		return exportsHeld(o) && o.Status.PendingPlanRef != nil && o.Status.PendingPlanRef.Name != plan.Name && o.Status.ActiveJob == nil
	})
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(plan), plan)).To(Succeed())
	g.Expect(plan.Labels[captfv1.PlanPhaseLabel]).To(Equal(string(captfv1.PlanFailed)))
	g.Expect(readState(t, ns, captfv1.KindMachinePool, "workers").Serial).To(Equal(movedOn), "nothing applied the moved plan")
	plan = pendingPlan(t, ns, "workers")
	g.Expect(plan).NotTo(BeNil())
	g.Expect(moved.Status.PendingPlanRef.Name).To(Equal(plan.Name))
	approve(t, plan, "alice")
	waitFor(t, moved, 3*time.Minute, "the approved exports applied after the move", func(o *captfv1.TerraformMachinePool) bool {
		return hasCondition(o, captfv1.ClusterExportsCurrentCondition, metav1.ConditionTrue, captfv1.ExportsAppliedReason) &&
			o.Status.ActiveJob == nil && o.Status.PendingPlanRef == nil
	})
	g.Expect(attachmentID(t, ns, "workers")).NotTo(Equal(attachment2))
	_, kept, _ = exportsRecord(t, ns, "workers")
	g.Expect(kept).To(HaveKeyWithValue("pool_attachment", "a3"))
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(plan), plan)).To(Succeed())
	g.Expect(plan.Labels[captfv1.PlanPhaseLabel]).To(Equal(string(captfv1.PlanApplied)))
}

// refreshedAfter waits until a refresh Job of the pool that finished after since succeeded.
func refreshedAfter(t *testing.T, ns, pool string, since time.Time) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		for _, j := range jobsOf(t, ns, captfv1.KindMachinePool, pool) {
			if j.Labels[captfv1.OperationLabel] == string(captfv1.OperationRefresh) &&
				j.Annotations[captfv1.BookkeptAnnotation] == string(captfv1.RunSucceeded) &&
				j.Status.CompletionTime != nil && j.Status.CompletionTime.After(since) {
				return true
			}
		}
		return false
	}, 2*time.Minute, 200*time.Millisecond).Should(BeTrue(), "a membership refresh succeeded after %s", since)
}

// TestPoolExportsApplyFailed: an apply of changed exports that fails midway loses the record of
// the applied exports (the group may already carry the new ones), and without a record nothing
// is held back: the next destructive exports change waits with the whole pool, replica changes
// included, until its approved apply succeeds and the record is kept again.
func TestPoolExportsApplyFailed(t *testing.T) {
	g := NewWithT(t)
	ns, _ := scenario(t)
	tc := newTerraformCluster(t, ns, "c", func(o *captfv1.TerraformCluster) {
		o.Spec.Variables = vars(map[string]any{"exports_extra": map[string]string{"pool_attachment": "a1"}})
	})
	mp, tmp := newPool(t, ns, "c", "workers", 1)
	waitFor(t, tmp, 3*time.Minute, "provisioned, the exports recorded", func(o *captfv1.TerraformMachinePool) bool {
		return provisioned(o.Status.Initialization) &&
			hasCondition(o, captfv1.ClusterExportsCurrentCondition, metav1.ConditionTrue, captfv1.ExportsAppliedReason)
	})

	// New exports whose apply fails after it changed the group.
	setExports(t, tc, map[string]string{"pool_attachment": "a1", "pool_label": "l2", "pool_fail": "true"})
	waitFor(t, tmp, 3*time.Minute, "the record lost to the failed apply", func(o *captfv1.TerraformMachinePool) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionFalse, captfv1.ApplyFailedReason) &&
			hasCondition(o, captfv1.ClusterExportsCurrentCondition, metav1.ConditionTrue, captfv1.ExportsRecordNotKeptReason)
	})
	status, kept, _ := exportsRecord(t, ns, "workers")
	g.Expect(status).To(Equal(inputs.ExportsApplyFailed))
	g.Expect(kept).To(BeNil())

	// A destructive exports change now waits with the whole pool: the scale-up waits too.
	setExports(t, tc, map[string]string{"pool_attachment": "a2", "pool_label": "l2"})
	waitFor(t, tmp, 3*time.Minute, "the whole pool blocked", func(o *captfv1.TerraformMachinePool) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionFalse, captfv1.DestructivePlanBlockedReason) &&
			o.Status.ActiveJob == nil
	})
	g.Expect(exportsHeld(tmp)).To(BeFalse())
	scalePool(t, mp, 2)
	g.Eventually(func() int {
		n := 0
		for _, j := range jobsOf(t, ns, captfv1.KindMachinePool, "workers") {
			if j.Annotations[captfv1.BookkeptAnnotation] == string(captfv1.RunBlocked) {
				n++
			}
		}
		return n
	}, 2*time.Minute, 200*time.Millisecond).Should(Equal(2), "the change at 2 replicas planned and blocked")
	waitFor(t, tmp, time.Minute, "blocked at 2 replicas, 1 instance", func(o *captfv1.TerraformMachinePool) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionFalse, captfv1.DestructivePlanBlockedReason) &&
			o.Status.ActiveJob == nil && o.Status.PendingPlanRef != nil
	})
	g.Expect(tmp.Status.Replicas).To(BeEquivalentTo(1), "nothing applied the scale-up")

	// The approved apply succeeds and the record is kept again.
	plan := pendingPlan(t, ns, "workers")
	g.Expect(plan).NotTo(BeNil())
	approve(t, plan, "alice")
	waitFor(t, tmp, 3*time.Minute, "applied, the record kept", func(o *captfv1.TerraformMachinePool) bool {
		return o.Status.Replicas == 2 && o.Status.ActiveJob == nil &&
			hasCondition(o, captfv1.ClusterExportsCurrentCondition, metav1.ConditionTrue, captfv1.ExportsAppliedReason)
	})
	status, kept, _ = exportsRecord(t, ns, "workers")
	g.Expect(status).To(Equal(inputs.ExportsKept))
	g.Expect(kept).To(HaveKeyWithValue("pool_attachment", "a2"))
}

// TestPoolExportsOversizeRecord: exports too large for the durable inputs Secret to keep beside
// the inputs are not recorded, and a destructive change of them waits with the whole pool.
func TestPoolExportsOversizeRecord(t *testing.T) {
	g := NewWithT(t)
	ns, _ := scenario(t)
	blob := make([]byte, inputs.MaxSize*3/5)
	for i := range blob {
		blob[i] = 'x'
	}
	tc := newTerraformCluster(t, ns, "c", func(o *captfv1.TerraformCluster) {
		o.Spec.Variables = vars(map[string]any{"exports_extra": map[string]string{"pool_attachment": "a1", "blob": string(blob)}})
	})
	_, tmp := newPool(t, ns, "c", "workers", 1)
	waitFor(t, tmp, 3*time.Minute, "provisioned, the record not kept", func(o *captfv1.TerraformMachinePool) bool {
		return provisioned(o.Status.Initialization) &&
			hasCondition(o, captfv1.ClusterExportsCurrentCondition, metav1.ConditionTrue, captfv1.ExportsRecordNotKeptReason)
	})
	g.Expect(conditions.GetMessage(tmp, captfv1.ClusterExportsCurrentCondition)).To(ContainSubstring("does not fit"))
	status, kept, rendered := exportsRecord(t, ns, "workers")
	g.Expect(status).To(Equal(inputs.ExportsOverBudget))
	g.Expect(kept).To(BeNil())
	g.Expect(rendered).To(HaveKey("blob"))

	setExports(t, tc, map[string]string{"pool_attachment": "a2", "blob": string(blob)})
	waitFor(t, tmp, 3*time.Minute, "the whole pool blocked", func(o *captfv1.TerraformMachinePool) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionFalse, captfv1.DestructivePlanBlockedReason) &&
			o.Status.ActiveJob == nil
	})
	g.Expect(exportsHeld(tmp)).To(BeFalse(), "nothing to hold back with")
}

// attachmentID is the id of the pool's terraform_data.attachment in its state.
func attachmentID(t *testing.T, ns, pool string) string {
	t.Helper()
	var doc struct {
		Resources []struct {
			Module, Type, Name string
			Instances          []struct {
				Attributes struct {
					ID string `json:"id"`
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	var compressed bytes.Buffer
	for _, name := range readState(t, ns, captfv1.KindMachinePool, pool).Chunks {
		chunk := &corev1.Secret{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, chunk); err != nil {
			t.Fatal(err)
		}
		compressed.Write(chunk.Data["tfstate"])
	}
	zr, err := gzip.NewReader(&compressed)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(zr).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range doc.Resources {
		if r.Type == "terraform_data" && r.Name == "attachment" && len(r.Instances) == 1 {
			return r.Instances[0].Attributes.ID
		}
	}
	t.Fatalf("no terraform_data.attachment in the state of %s", pool)
	return ""
}

// simulateMove does to a pool what clusterctl move does to it between two management clusters,
// on one API server: with the Cluster paused, the pool's Jobs are left behind (deleted), and the
// pool, its live TerraformPlans and what they own come back without status and with new UIDs,
// the Secrets that moved with them owned by the new objects. (Its MachinePool stays: the pool's
// owner reference is copied as it was.) The Cluster is unpaused again; the new pool is returned.
func simulateMove(t *testing.T, ns, cluster string, tmp *captfv1.TerraformMachinePool) *captfv1.TerraformMachinePool {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster}}
	update(t, c, func(o *clusterv1.Cluster) { o.Spec.Paused = ptr.To(true) })
	waitFor(t, tmp, time.Minute, "paused for the move", func(o *captfv1.TerraformMachinePool) bool {
		return conditions.IsTrue(o, clusterv1.PausedCondition)
	})
	g.Expect(activeJobs(t, ns)).To(BeEmpty(), "clusterctl move waits for block-move")
	for _, j := range jobsOf(t, ns, captfv1.KindMachinePool, tmp.Name) {
		g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, &j, client.PropagationPolicy(metav1.DeletePropagationBackground)))).To(Succeed())
	}

	// What the pool and its plans own, by the old UIDs; the owner references to them are
	// dropped first, so the garbage collector takes nothing once the old objects are gone.
	secrets := &corev1.SecretList{}
	g.Expect(env.Client.List(ctx, secrets, client.InNamespace(ns))).To(Succeed())
	ownedBy := func(uid string) (names []string) {
		for i := range secrets.Items {
			s := &secrets.Items[i]
			for _, ref := range s.OwnerReferences {
				if string(ref.UID) == uid {
					names = append(names, s.Name)
				}
			}
		}
		return names
	}
	disown := func(names []string, uid string) {
		for _, name := range names {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			update(t, s, func(o *corev1.Secret) {
				var keep []metav1.OwnerReference
				for _, ref := range o.OwnerReferences {
					if string(ref.UID) != uid {
						keep = append(keep, ref)
					}
				}
				o.OwnerReferences = keep
			})
		}
	}
	own := func(names []string, owner metav1.OwnerReference) {
		for _, name := range names {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			update(t, s, func(o *corev1.Secret) { o.OwnerReferences = append(o.OwnerReferences, owner) })
		}
	}
	// The plans' published views move with them, as clusterctl moves what a moved object owns.
	views := &captfv1.TerraformPlanViewList{}
	g.Expect(env.Client.List(ctx, views, client.InNamespace(ns))).To(Succeed())
	viewsOf := func(uid string) (out []captfv1.TerraformPlanView) {
		for _, v := range views.Items {
			if ref := metav1.GetControllerOf(&v); ref != nil && string(ref.UID) == uid {
				update(t, &v, func(o *captfv1.TerraformPlanView) { o.OwnerReferences = nil })
				out = append(out, v)
			}
		}
		return out
	}
	type movedPlan struct {
		plan    captfv1.TerraformPlan
		secrets []string
		views   []captfv1.TerraformPlanView
	}
	var plans []movedPlan
	for _, tp := range plansOf(t, ns) {
		ref := metav1.GetControllerOf(&tp)
		if ref == nil || ref.UID != tmp.UID {
			continue
		}
		phase := captfv1.PlanPhase(tp.Labels[captfv1.PlanPhaseLabel])
		if phase == captfv1.PlanPending || phase == captfv1.PlanApproved {
			plans = append(plans, movedPlan{plan: tp, secrets: ownedBy(string(tp.UID)), views: viewsOf(string(tp.UID))})
			disown(plans[len(plans)-1].secrets, string(tp.UID))
		}
		g.Expect(env.Client.Delete(ctx, &tp)).To(Succeed())
		gone(t, &tp, time.Minute)
	}
	poolSecrets := ownedBy(string(tmp.UID))
	g.Expect(poolSecrets).NotTo(BeEmpty())
	disown(poolSecrets, string(tmp.UID))

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tmp), tmp)).To(Succeed())
	moved := &captfv1.TerraformMachinePool{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: tmp.Name, Labels: tmp.Labels, Annotations: tmp.Annotations,
		OwnerReferences: tmp.OwnerReferences, Finalizers: tmp.Finalizers,
	}, Spec: tmp.Spec}
	g.Expect(env.Client.Delete(ctx, tmp)).To(Succeed())
	update(t, tmp, func(o *captfv1.TerraformMachinePool) { o.Finalizers = nil })
	gone(t, tmp, time.Minute)
	create(t, moved)
	ref := metav1.OwnerReference{APIVersion: captfv1.GroupVersion.String(), Kind: captfv1.KindMachinePool,
		Name: moved.Name, UID: moved.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	own(poolSecrets, ref)
	for _, mvp := range plans {
		tp := &captfv1.TerraformPlan{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: mvp.plan.Name, Labels: mvp.plan.Labels, Annotations: mvp.plan.Annotations,
			OwnerReferences: []metav1.OwnerReference{ref},
		}, Spec: mvp.plan.Spec}
		create(t, tp)
		planRef := metav1.OwnerReference{APIVersion: captfv1.GroupVersion.String(), Kind: "TerraformPlan",
			Name: tp.Name, UID: tp.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
		own(mvp.secrets, planRef)
		for _, v := range mvp.views {
			update(t, &v, func(o *captfv1.TerraformPlanView) { o.OwnerReferences = []metav1.OwnerReference{planRef} })
		}
	}
	update(t, c, func(o *clusterv1.Cluster) { o.Spec.Paused = ptr.To(false) })
	return moved
}
