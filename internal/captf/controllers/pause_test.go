package controllers_test

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/leases"
)

// TestPause: pausing the Cluster while a Job runs lets the Job finish and records it
// (bookkeeping runs while paused); clusterctl's block-move annotation is set while the Job runs
// and cleared after; while paused nothing is created or deleted in the namespace (the run's
// lease stays) and no Job starts, and deleting a paused object destroys nothing (Deleting says
// it waits) until the Cluster is unpaused.
func TestPause(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, kubelet := scenario(t)
	newForeignCluster(t, ns, "c")
	blockMove := func(o *captfv1.TerraformMachine) bool {
		_, ok := o.Annotations[clusterctlv1.BlockMoveAnnotation]
		return ok
	}

	// The module sleeps 10 s in its apply: long enough to pause the Cluster mid-run.
	tm := newTerraformMachine(t, ns, "c", "m1", func(o *captfv1.TerraformMachine) {
		o.Spec.Variables = vars(map[string]any{"slow": 10})
	})
	waitFor(t, tm, time.Minute, "an apply running with block-move set", func(o *captfv1.TerraformMachine) bool {
		return o.Status.ActiveJob != nil && blockMove(o)
	})
	job := tm.Status.ActiveJob.Name
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}}
	update(t, cluster, func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true) })
	waitFor(t, tm, time.Minute, "paused", func(o *captfv1.TerraformMachine) bool {
		return conditions.IsTrue(o, clusterv1.PausedCondition)
	})
	g.Expect(activeJobs(t, ns)).NotTo(BeEmpty(), "the Cluster was paused while the Job ran")

	// The Job finishes while paused: it is recorded and block-move goes.
	waitFor(t, tm, 2*time.Minute, "the apply recorded while paused", func(o *captfv1.TerraformMachine) bool {
		return o.Status.LastRun != nil && o.Status.LastRun.Job == job && o.Status.ActiveJob == nil && !blockMove(o)
	})
	g.Expect(tm.Status.LastRun.Result).To(Equal(captfv1.RunSucceeded))
	g.Expect(conditions.IsTrue(tm, clusterv1.PausedCondition)).To(BeTrue())
	recorded := jobsOf(t, ns, captfv1.KindMachine, "m1")
	g.Expect(recorded).To(HaveLen(1))
	g.Expect(recorded[0].Annotations).To(HaveKeyWithValue(captfv1.BookkeptAnnotation, string(captfv1.RunSucceeded)))

	// Paused, the manager creates and deletes nothing in the namespace (clusterctl move copies
	// what it listed before it paused the Cluster): the run's lease stays (released after the
	// unpause, or freed on a move's target once its Job is not there) and nothing comes or goes.
	owner, err := jobs.OwnerOf(tm, "c")
	g.Expect(err).NotTo(HaveOccurred())
	lease := &coordinationv1.Lease{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: leases.RunLeaseName(owner)}, lease)).To(Succeed(),
		"the run lease is not released while paused")
	before := namespaceObjects(t, ns)
	never(t, 5*time.Second, "an object created or deleted in the paused namespace", func() bool {
		return !slices.Equal(namespaceObjects(t, ns), before)
	})

	// Deleting a paused object waits: no destroy while paused (clusterctl move deletes the
	// objects it copied while they are paused).
	g.Expect(env.Client.Delete(ctx, tm)).To(Succeed())
	waitFor(t, tm, time.Minute, "the deletion waiting", func(o *captfv1.TerraformMachine) bool {
		c := conditions.Get(o, clusterv1.DeletingCondition)
		return c != nil && c.Status == metav1.ConditionTrue && c.Message != ""
	})
	g.Expect(conditions.Get(tm, clusterv1.DeletingCondition).Message).To(ContainSubstring("unpaused"))
	pods := kubelet.Started()
	never(t, 5*time.Second, "a Job started while paused", func() bool {
		return kubelet.Started() > pods || len(jobsOf(t, ns, captfv1.KindMachine, "m1")) > 1
	})
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tm), tm)).To(Succeed(), "the paused object stays")

	// Unpaused, the deletion destroys and completes.
	update(t, cluster, func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(false) })
	gone(t, tm, 2*time.Minute)
	g.Expect(kubelet.Log.String()).To(ContainSubstring("captf-m-m1-destroy"), "the destroy ran after unpausing")
}

// namespaceObjects names what the manager could create or delete in a namespace: its Secrets,
// ConfigMaps, Leases, RoleBindings, Jobs, TerraformPlans and plan views, as kind/name, sorted.
func namespaceObjects(t *testing.T, ns string) []string {
	t.Helper()
	var out []string
	for kind, list := range map[string]client.ObjectList{
		"Secret": &corev1.SecretList{}, "ConfigMap": &corev1.ConfigMapList{}, "Lease": &coordinationv1.LeaseList{},
		"RoleBinding": &rbacv1.RoleBindingList{}, "Job": &batchv1.JobList{},
		"TerraformPlan": &captfv1.TerraformPlanList{}, "TerraformPlanView": &captfv1.TerraformPlanViewList{},
	} {
		if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items {
			out = append(out, kind+"/"+item.(client.Object).GetName())
		}
	}
	slices.Sort(out)
	return out
}
