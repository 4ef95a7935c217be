package controllers

import (
	"context"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/savedplan"
	"github.com/capx-io/capx/internal/scheme"
)

// TestRecordApproval: the housekeeping phase after findPlan moves an approved plan to the
// Approved phase (status and the phase label that survives a move) with one Event, and
// leaves a pending or already-Approved plan alone.
func TestRecordApproval(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tp := &captfv1.TerraformPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-plan-1", Labels: map[string]string{captfv1.PlanPhaseLabel: string(captfv1.PlanPending)}},
		Spec:       captfv1.TerraformPlanSpec{PlanHash: "p2:x"},
		Status:     captfv1.TerraformPlanStatus{Phase: captfv1.PlanPending},
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tp).WithStatusSubresource(tp).Build()
	rec := record.NewFakeRecorder(4)
	r := &provider[*captfv1.TerraformCluster]{engine: &engine{client: c, recorder: rec}}
	p := &pass[*captfv1.TerraformCluster]{scope: &reconcileScope[*captfv1.TerraformCluster]{Object: &captfv1.TerraformCluster{}}}

	read := func() *captfv1.TerraformPlan {
		got := &captfv1.TerraformPlan{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(tp), got)).To(Succeed())
		return got
	}
	p.pendingPlan = read()
	g.Expect(r.recordApproval(ctx, p)).To(Succeed())
	g.Expect(read().Status.Phase).To(Equal(captfv1.PlanPending), "not approved: nothing written")
	g.Expect(rec.Events).To(BeEmpty())

	approved := read()
	approved.Spec.Approved, approved.Spec.ApprovedBy = true, "alice"
	g.Expect(c.Update(ctx, approved)).To(Succeed())
	p.pendingPlan = read()
	g.Expect(r.recordApproval(ctx, p)).To(Succeed())
	got := read()
	g.Expect(got.Status.Phase).To(Equal(captfv1.PlanApproved))
	g.Expect(got.Labels).To(HaveKeyWithValue(captfv1.PlanPhaseLabel, string(captfv1.PlanApproved)))
	g.Expect(<-rec.Events).To(Equal("Normal PlanApproved TerraformPlan c-plan-1 was approved by alice"))

	p.pendingPlan = got
	g.Expect(r.recordApproval(ctx, p)).To(Succeed())
	g.Expect(rec.Events).To(BeEmpty(), "recorded once")
	g.Expect(read().ResourceVersion).To(Equal(got.ResourceVersion), "nothing written again")
}

// TestNextAttemptAfterAMove: a run's number comes from the Jobs still listed and from the
// object's TerraformPlans, which clusterctl move carries while it leaves the Jobs behind, so no
// new Job is named like the Job that made one of the plans (its plan would take the plan's name
// and never be recorded). From the same observations the number is the same, so a pass that
// crashed after creating a Job it cannot see yet names that Job again.
func TestNextAttemptAfterAMove(t *testing.T) {
	o := jobs.Owner{Kind: captfv1.KindMachinePool, Namespace: "ns", Name: "workers", UID: "uid-2"}
	const hash = "h2:a"
	planOf := func(op captfv1.Operation, attempt int) string {
		return savedplan.PlanName(o.Name, jobs.Name(o.Kind, o.Name, string(op), attempt, hash))
	}
	job := func(op captfv1.Operation, attempt int, h string) batchv1.Job {
		return batchv1.Job{ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{captfv1.OperationLabel: string(op), captfv1.AttemptLabel: strconv.Itoa(attempt)},
			Annotations: map[string]string{captfv1.InputsHashAnnotation: h},
		}}
	}
	apply, plan := captfv1.OperationApply, captfv1.OperationPlan
	for _, c := range []struct {
		promise string
		jobs    []batchv1.Job
		plans   []string
		op      captfv1.Operation
		want    int
	}{
		{"the first run is 1", nil, nil, apply, 1},
		{"one past the Jobs of the same operation and inputs", []batchv1.Job{job(apply, 2, hash), job(apply, 5, "h2:b"), job(plan, 7, hash)}, nil, apply, 3},
		{"after a move, past the Job that made the moved plan", nil, []string{planOf(apply, 1)}, apply, 2},
		{"past a chain of plans, each made by the run before", nil, []string{planOf(apply, 2), planOf(apply, 1)}, apply, 3},
		{"past a Job pruned whose plan stayed", []batchv1.Job{job(apply, 1, hash)}, []string{planOf(apply, 2)}, apply, 3},
		{"a plan Job's plan does not number applies", nil, []string{planOf(plan, 1)}, apply, 1},
		{"nor another object's plan of the same Job name", nil, []string{savedplan.PlanName("other", jobs.Name(o.Kind, o.Name, string(apply), 1, hash))}, apply, 1},
	} {
		t.Run(c.promise, func(t *testing.T) {
			names := map[string]bool{}
			for _, n := range c.plans {
				names[n] = true
			}
			if got := nextAttempt(o, c.jobs, names, c.op, hash); got != c.want {
				t.Errorf("nextAttempt = %d, want %d", got, c.want)
			}
			if again := nextAttempt(o, c.jobs, names, c.op, hash); again != c.want {
				t.Errorf("the same observations numbered %d, then %d", c.want, again)
			}
		})
	}
}
