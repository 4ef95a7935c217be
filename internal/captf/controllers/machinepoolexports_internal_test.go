package controllers

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/inputs"
	"github.com/capx-io/capx/internal/captf/jobs"
)

// poolInputs renders a pool's inputs with the exports.
func poolInputs(t *testing.T, exports string) *inputs.Rendered {
	t.Helper()
	r, err := inputs.Render(inputs.Source{
		Owner:          jobs.Owner{Kind: captfv1.KindMachinePool, Namespace: "ns", Name: "workers", UID: "u1", ClusterName: "c"},
		MachinePool:    &inputs.MachinePoolInputs{MachinePoolName: "workers", Replicas: 2, BootstrapData: []byte("x"), BootstrapFormat: "cloud-config"},
		ClusterOutputs: json.RawMessage(exports),
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func applyJob(hash string, res captfv1.RunResult) batchv1.Job {
	j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Labels:      map[string]string{captfv1.OperationLabel: string(captfv1.OperationApply)},
		Annotations: map[string]string{captfv1.InputsHashAnnotation: hash},
	}}
	if res != "" {
		j.Annotations[captfv1.BookkeptAnnotation] = string(res)
	}
	return j
}

// TestSettleExports: the record follows what happened since it was written.
func TestSettleExports(t *testing.T) {
	a, b := poolInputs(t, `{"attachment":"a1"}`), poolInputs(t, `{"attachment":"a2"}`)
	keptA := inputs.KeptExports(a)
	pendingB := keptA
	pendingB.Pending = b.Hash
	lost := inputs.ExportsRecord{Status: inputs.ExportsApplyFailed}
	for _, tc := range []struct {
		name      string
		durable   *inputs.Rendered
		record    inputs.ExportsRecord
		stateHash string
		jobs      []batchv1.Job
		want      inputs.ExportsRecord
	}{
		{"the durable inputs applied: their exports", a, inputs.ExportsRecord{}, a.Hash, nil, keptA},
		{"an apply of b succeeded", b, pendingB, b.Hash, []batchv1.Job{applyJob(b.Hash, captfv1.RunSucceeded)}, inputs.KeptExports(b)},
		{"nothing applied yet", a, inputs.ExportsRecord{}, "", nil, inputs.ExportsRecord{}},
		{"kept, another apply stored its inputs", b, keptA, a.Hash, nil, keptA},
		{"the guard stopped b", b, pendingB, a.Hash, []batchv1.Job{applyJob(b.Hash, captfv1.RunBlocked)}, keptA},
		{"the approved b planned again", b, pendingB, a.Hash, []batchv1.Job{applyJob(b.Hash, captfv1.RunPlanChanged)}, keptA},
		{"b failed midway", b, pendingB, a.Hash, []batchv1.Job{applyJob(b.Hash, captfv1.RunFailed)}, lost},
		{"b was interrupted", b, pendingB, a.Hash, []batchv1.Job{applyJob(b.Hash, captfv1.RunInterrupted)}, lost},
		{"the newest run of b counts", b, pendingB, a.Hash,
			[]batchv1.Job{applyJob(b.Hash, captfv1.RunFailed), applyJob(b.Hash, captfv1.RunBlocked)}, lost},
		{"b runs: pending", b, pendingB, a.Hash, []batchv1.Job{applyJob(b.Hash, "")}, pendingB},
		{"b's Job is gone (moved): pending", b, pendingB, a.Hash, []batchv1.Job{applyJob(a.Hash, captfv1.RunSucceeded)}, pendingB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stored := &inputs.Stored{Rendered: tc.durable, Exports: tc.record}
			NewWithT(t).Expect(settleExports(stored, tc.stateHash, tc.jobs)).To(Equal(tc.want))
		})
	}
}

// TestExportsCondition: ClusterExportsCurrent says whether a change is held, and whether the
// record that holds it back is there.
func TestExportsCondition(t *testing.T) {
	plan := &captfv1.TerraformPlan{ObjectMeta: metav1.ObjectMeta{Name: "workers-0123456789"}}
	for _, tc := range []struct {
		name   string
		hold   *exportsHold
		status metav1.ConditionStatus
		reason string
		msg    string
	}{
		{"applied", &exportsHold{record: inputs.ExportsRecord{Status: inputs.ExportsKept}}, metav1.ConditionTrue, captfv1.ExportsAppliedReason, ""},
		{"held", &exportsHold{record: inputs.ExportsRecord{Status: inputs.ExportsKept}, plan: plan}, metav1.ConditionFalse,
			captfv1.ExportsChangeHeldReason, "`kubectl captf approve workers-0123456789 -n ns`"},
		{"over budget", &exportsHold{record: inputs.ExportsRecord{Status: inputs.ExportsOverBudget}}, metav1.ConditionTrue,
			captfv1.ExportsRecordNotKeptReason, "does not fit"},
		{"lost", &exportsHold{record: inputs.ExportsRecord{Status: inputs.ExportsApplyFailed}}, metav1.ConditionTrue,
			captfv1.ExportsRecordNotKeptReason, "did not succeed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			mp := &captfv1.TerraformMachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "workers", Generation: 3}}
			setExportsCondition(mp, tc.hold)
			c := conditions.Get(mp, captfv1.ClusterExportsCurrentCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(tc.status))
			g.Expect(c.Reason).To(Equal(tc.reason))
			g.Expect(c.Message).To(ContainSubstring(tc.msg))
			g.Expect(c.ObservedGeneration).To(BeEquivalentTo(3))
		})
	}
	mp := &captfv1.TerraformMachinePool{}
	setExportsCondition(mp, nil)
	NewWithT(t).Expect(conditions.Get(mp, captfv1.ClusterExportsCurrentCondition)).To(BeNil(), "nothing observed, nothing said")
}
