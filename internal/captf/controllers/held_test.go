package controllers_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/jobs"
)

// objectEvents are the Events about the named object, as "<type> <reason>: <message>"; related
// names the Job each is about ("" when it names none).
func objectEvents(t *testing.T, ns, name string) (events []string, related []string) {
	t.Helper()
	list := &corev1.EventList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.InvolvedObject.Name != name {
			continue
		}
		events = append(events, e.Type+" "+e.Reason+": "+e.Message)
		job := ""
		if e.Related != nil {
			job = e.Related.Name
		}
		related = append(related, job)
	}
	return events, related
}

// poll calls probe every 50 ms until the returned stop is called or the test ends. probe must
// not fail the test (it runs on another goroutine).
func poll(t *testing.T, probe func()) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(50 * time.Millisecond):
			}
			probe()
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(quit); <-done }) }
	t.Cleanup(stop)
	return stop
}

// TestHeldPlanIsNoFailure: a plan the destructive guard holds is the guard at work, not a
// failure. Its apply Job completes (no failed Job), and nothing about it is a Warning: the
// manager's Event and the runner's say the plan waits for approval. And a pool's periodic
// membership refresh never makes the pool un-ready: while a refresh Job runs, ApplyJobSucceeded
// keeps the newest apply's result, which the pool's Ready counts.
func TestHeldPlanIsNoFailure(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := scenario(t)

	newForeignCluster(t, ns, "f")
	_, tmp := newPool(t, ns, "f", "workers", 1, func(o *captfv1.TerraformMachinePool) {
		o.Spec.MembershipRefreshIntervalSeconds = ptr.To[int32](15)
	})
	tc := newTerraformCluster(t, ns, "c1", nil)
	waitFor(t, tmp, 2*time.Minute, "the pool provisioned and ready", func(o *captfv1.TerraformMachinePool) bool {
		return provisioned(o.Status.Initialization) && conditions.IsTrue(o, captfv1.ReadyCondition) && o.Status.ActiveJob == nil
	})

	// From now on, whenever a refresh Job of the pool runs, the pool's Ready and
	// ApplyJobSucceeded are read.
	var mu sync.Mutex
	var refreshes []string
	var unready []string
	stop := poll(t, func() {
		o := &captfv1.TerraformMachinePool{}
		list := &batchv1.JobList{}
		if env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{
			captfv1.OwnerKindLabel: captfv1.KindMachinePool, captfv1.OperationLabel: string(captfv1.OperationRefresh)}) != nil {
			return
		}
		var running []string
		for _, j := range list.Items {
			if jobs.Classify(&j) == jobs.PhaseActive {
				running = append(running, j.Name)
			}
		}
		if len(running) == 0 || env.Client.Get(ctx, client.ObjectKeyFromObject(tmp), o) != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		refreshes = append(refreshes, running...)
		for _, c := range []string{captfv1.ReadyCondition, captfv1.ApplyJobSucceededCondition} {
			if !conditions.IsTrue(o, c) {
				got := conditions.Get(o, c)
				unready = append(unready, c+" while "+strings.Join(running, ",")+" ran: "+got.Reason+": "+got.Message)
			}
		}
	})

	// The cluster's first apply ran unguarded; a new network CIDR replaces the network.
	waitFor(t, tc, 2*time.Minute, "provisioned", func(o *captfv1.TerraformCluster) bool {
		return provisioned(o.Status.Initialization) && o.Status.ActiveJob == nil
	})
	update(t, tc, func(o *captfv1.TerraformCluster) {
		o.Spec.Variables = vars(map[string]any{"network_cidr": "10.9.0.0/16"})
	})
	waitFor(t, tc, 2*time.Minute, "the replace held", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionFalse, captfv1.DestructivePlanBlockedReason) &&
			o.Status.PendingPlanRef != nil
	})
	var held *batchv1.Job
	for _, j := range jobsOf(t, ns, captfv1.KindCluster, "c1") {
		if j.Annotations[captfv1.BookkeptAnnotation] == string(captfv1.RunBlocked) {
			held = &j
		}
	}
	g.Expect(held).NotTo(BeNil(), "the held apply is recorded as Blocked")
	g.Expect(jobs.Classify(held)).To(Equal(jobs.PhaseSucceeded), "a held plan's Job completes; it is no failed Job")
	g.Eventually(func() []string {
		events, related := objectEvents(t, ns, "c1")
		var about []string
		for i, e := range events {
			if related[i] == held.Name || strings.Contains(e, held.Name) {
				about = append(about, e)
			}
		}
		return about
	}, 30*time.Second, 200*time.Millisecond).Should(And(
		ContainElement(HavePrefix("Normal JobBlocked: apply Job "+held.Name+" held its plan for approval")),
		ContainElement(HavePrefix("Normal PlanHeld: apply held")),
		Not(ContainElement(HavePrefix("Warning"))),
	), "the Events about the held apply")

	// A refresh of the pool ran and finished meanwhile; the pool was ready all along.
	g.Eventually(func() int {
		n := 0
		for _, j := range jobsOf(t, ns, captfv1.KindMachinePool, "workers") {
			if j.Labels[captfv1.OperationLabel] == string(captfv1.OperationRefresh) && j.Annotations[captfv1.BookkeptAnnotation] != "" {
				n++
			}
		}
		return n
	}, 2*time.Minute, 200*time.Millisecond).Should(BeNumerically(">", 0), "a membership refresh finished")
	stop()
	mu.Lock()
	defer mu.Unlock()
	g.Expect(refreshes).NotTo(BeEmpty(), "a refresh Job was seen running")
	g.Expect(unready).To(BeEmpty(), "the pool's Ready and ApplyJobSucceeded while its refreshes ran")
}
