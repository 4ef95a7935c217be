package leases

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/jobs"
)

func TestFree(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	lease := func(holder string, acquired *time.Time, duration *int32) *coordinationv1.Lease {
		l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: duration}}
		if holder != "" {
			l.Spec.HolderIdentity = ptr.To(holder)
		}
		if acquired != nil {
			l.Spec.AcquireTime = ptr.To(metav1.NewMicroTime(*acquired))
		}
		return l
	}
	job := func(conds ...batchv1.JobConditionType) *batchv1.Job {
		j := &batchv1.Job{}
		for _, c := range conds {
			j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue})
		}
		return j
	}
	backstop := ptr.To[int32](4500)
	tests := []struct {
		name   string
		lease  *coordinationv1.Lease
		holder *batchv1.Job
		after  time.Duration
		want   bool
	}{
		{"no holder", lease("", &t0, backstop), job(), 0, true},
		{"a Job about to be created", lease("j", &t0, backstop), nil, 0, false},
		{"still within the grace", lease("j", &t0, backstop), nil, 59 * time.Second, false},
		{"past the grace without the Job", lease("j", &t0, backstop), nil, 61 * time.Second, true},
		{"the Job runs", lease("j", &t0, backstop), job(), time.Hour, false},
		{"the Job is stopping after a failure", lease("j", &t0, backstop), job(batchv1.JobFailureTarget), time.Hour, false},
		{"past the backstop", lease("j", &t0, backstop), job(), 4501 * time.Second, true},
		{"the Job succeeded", lease("j", &t0, backstop), job(batchv1.JobComplete), time.Second, true},
		{"the Job failed", lease("j", &t0, backstop), job(batchv1.JobFailed), time.Second, true},
		{"no acquire time counts as long ago", lease("j", nil, backstop), job(), 0, true},
		{"no backstop counts as expired", lease("j", &t0, nil), job(), time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(Free(tt.lease, tt.holder, t0.Add(tt.after))).To(Equal(tt.want))
		})
	}
}

func TestNames(t *testing.T) {
	g := NewWithT(t)
	long := jobs.Owner{Kind: captfv1.KindMachinePool, Namespace: "ns", Name: string(make([]byte, 253))}
	g.Expect(RunLeaseName(long)).To(MatchRegexp(`^captf-run-[0-9a-f]{16}-mp$`))
	g.Expect(len(RunLeaseName(long))).To(Equal(29))
	g.Expect(ClusterLeaseName("ns", "c1")).To(MatchRegexp(`^captf-cluster-[0-9a-f]{16}$`))
	g.Expect(ClusterLeaseName("ns", "c1")).NotTo(Equal(ClusterLeaseName("ns2", "c1")))
	g.Expect(Mutating(contract.OpApply) && Mutating(contract.OpDestroy) && Mutating(contract.OpRestore)).To(BeTrue())
	g.Expect(Mutating(contract.OpPlan) || Mutating(contract.OpRefresh) || Mutating(contract.OpDrift)).To(BeFalse())
}
