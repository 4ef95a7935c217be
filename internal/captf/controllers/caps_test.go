package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// watchConcurrency records the most Jobs seen running at once in a namespace until the test
// ends.
func watchConcurrency(t *testing.T, ns string) func() int {
	return watchActiveJobs(t, ns, func(most int, running []batchv1.Job) int { return max(most, len(running)) })
}

// TestJobCaps: with --max-active-jobs=1 two objects never run Jobs at once and the one that
// waits reports ApplyJobSucceeded=Unknown/WaitingForJobSlot; a ResourceQuota that forbids Jobs
// gives ApplyJobSucceeded=False/QuotaExceeded, and nothing runs.
func TestJobCaps(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := scenario(t, "--max-active-jobs=1")
	newForeignCluster(t, ns, "c")
	most := watchConcurrency(t, ns)

	slow := func(o *captfv1.TerraformMachine) { o.Spec.Variables = vars(map[string]any{"slow": 4}) }
	m1 := newTerraformMachine(t, ns, "c", "m1", slow)
	waitFor(t, m1, time.Minute, "an apply running", func(o *captfv1.TerraformMachine) bool { return o.Status.ActiveJob != nil })
	m2 := newTerraformMachine(t, ns, "c", "m2", slow)
	waitFor(t, m2, time.Minute, "waiting for a Job slot", func(o *captfv1.TerraformMachine) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionUnknown, captfv1.WaitingForJobSlotReason)
	})
	for _, m := range []*captfv1.TerraformMachine{m1, m2} {
		waitFor(t, m, 2*time.Minute, "provisioned", func(o *captfv1.TerraformMachine) bool {
			return provisioned(o.Status.Initialization)
		})
	}
	g.Expect(most()).To(Equal(1), "at most one Job ran at a time")

	// A quota that allows no Jobs: the Job is refused, and the object says why.
	create(t, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-jobs"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/jobs.batch": resource.MustParse("0")}},
	})
	m3 := newTerraformMachine(t, ns, "c", "m3", nil)
	waitFor(t, m3, time.Minute, "refused by the quota", func(o *captfv1.TerraformMachine) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionFalse, captfv1.QuotaExceededReason)
	})
	g.Expect(describe(m3)).To(ContainSubstring("no-jobs"), "the message names the quota")
	g.Expect(m3.Annotations).NotTo(HaveKey(clusterctlv1.BlockMoveAnnotation), "no Job runs, so nothing blocks a move")
	// The first passes may still add what they observed (the durable inputs Secret the refused
	// start wrote brings the object back once per informer); once it has settled, retrying the
	// refused Job must not rewrite it. An object rewritten in a loop never settles.
	var version string
	g.Eventually(func() (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m3), m3); err != nil {
			return false, err
		}
		before := m3.ResourceVersion
		time.Sleep(2 * time.Second)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m3), m3); err != nil {
			return false, err
		}
		version = m3.ResourceVersion
		return version == before, nil
	}, time.Minute, 10*time.Millisecond).Should(BeTrue(), "the refused object settles")
	g.Expect(describe(m3)).To(ContainSubstring("no-jobs"), "still refused by the quota")
	never(t, 4*time.Second, "a Job ran despite the quota, or the refusal rewrote the object", func() bool {
		return len(jobsOf(t, ns, captfv1.KindMachine, "m3")) > 0 ||
			env.Client.Get(ctx, client.ObjectKeyFromObject(m3), m3) != nil || m3.ResourceVersion != version
	})
}

// TestNamespaceJobCap (issue 19): one tenant cannot take every Job slot. With
// --namespace-max-active-jobs=1 two objects of one namespace never run Jobs at once, even though
// their cluster allows ten (spec.maxActiveJobs above the namespace's cap counts as the cap), and
// the one that waits says which cap it waits for.
func TestNamespaceJobCap(t *testing.T) {
	g := NewWithT(t)
	ns, _ := scenario(t, "--namespace-max-active-jobs=1", "--max-active-jobs=0", "--cluster-max-active-jobs=0")
	ten := int32(10)
	tc := newTerraformCluster(t, ns, "c", func(o *captfv1.TerraformCluster) { o.Spec.MaxActiveJobs = &ten })
	waitFor(t, tc, 2*time.Minute, "provisioned", func(o *captfv1.TerraformCluster) bool { return provisioned(o.Status.Initialization) })
	most := watchConcurrency(t, ns)

	slow := func(o *captfv1.TerraformMachine) { o.Spec.Variables = vars(map[string]any{"slow": 4}) }
	m1 := newTerraformMachine(t, ns, "c", "m1", slow)
	waitFor(t, m1, time.Minute, "an apply running", func(o *captfv1.TerraformMachine) bool { return o.Status.ActiveJob != nil })
	m2 := newTerraformMachine(t, ns, "c", "m2", slow)
	waitFor(t, m2, time.Minute, "waiting for the namespace's Job slot", func(o *captfv1.TerraformMachine) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionUnknown, captfv1.WaitingForJobSlotReason)
	})
	g.Expect(describe(m2)).To(Or(
		ContainSubstring("namespace "+ns+"'s cap of 1 active Jobs (--namespace-max-active-jobs)"),
		ContainSubstring("spec.maxActiveJobs of TerraformCluster c, 10, is above the namespace's cap and counts as 1")))
	for _, m := range []*captfv1.TerraformMachine{m1, m2} {
		waitFor(t, m, 2*time.Minute, "provisioned", func(o *captfv1.TerraformMachine) bool { return provisioned(o.Status.Initialization) })
	}
	g.Expect(most()).To(Equal(1), "at most one Job of the namespace ran at a time")
}
