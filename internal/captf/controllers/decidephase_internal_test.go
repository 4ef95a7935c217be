package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
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
