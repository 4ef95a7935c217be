package jobs

import (
	"context"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/scheme"
)

// history builds Jobs from a compact spec, oldest first: "<op>:<phase>[:new]" where phase is
// ok, fail, deadline, held (completed, its plan held for approval) or active, and :new marks a
// Job whose result is not recorded yet.
func history(specs ...string) []batchv1.Job {
	var jobs []batchv1.Job
	for i, s := range specs {
		parts := append(strings.Split(s, ":"), "")
		op, phase, flag := parts[0], parts[1], parts[2]
		j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "j" + strconv.Itoa(i) + "-" + op + "-" + phase, UID: types.UID("uid-" + strconv.Itoa(i)),
			CreationTimestamp: metav1.Unix(int64(i), 0),
			Labels:            map[string]string{captfv1.OperationLabel: op, captfv1.AttemptLabel: "1"},
			Annotations:       map[string]string{},
		}}
		if flag != "new" {
			j.Annotations[captfv1.BookkeptAnnotation] = "true"
		}
		switch phase {
		case "held": // a guarded apply that held its plan for approval: its Job completes
			j.Annotations[captfv1.BookkeptAnnotation] = string(captfv1.RunBlocked)
			j.Status.Conditions = []batchv1.JobCondition{condition(batchv1.JobComplete, "")}
		case "ok":
			j.Status.Conditions = []batchv1.JobCondition{condition(batchv1.JobComplete, "")}
		case "fail":
			j.Status.Conditions = []batchv1.JobCondition{condition(batchv1.JobFailed, "")}
		case "deadline":
			j.Status.Conditions = []batchv1.JobCondition{condition(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded)}
		}
		jobs = append(jobs, j)
	}
	SortNewestFirst(jobs)
	return jobs
}

func names(jobs []batchv1.Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.Name)
	}
	return out
}

func TestPruneCandidates(t *testing.T) {
	limits := func(success, failed int32) Policy {
		return Policy{SuccessfulJobsHistoryLimit: success, FailedJobsHistoryLimit: failed}
	}
	tests := []struct {
		name   string
		jobs   []batchv1.Job
		policy Policy
		want   []string
	}{
		{"nothing", nil, limits(3, 3), nil},
		{"within the limits", history("apply:ok", "apply:fail", "refresh:ok"), limits(3, 3), nil},
		{
			name:   "the oldest successes beyond the limit go",
			jobs:   history("apply:ok", "refresh:ok", "refresh:ok", "refresh:ok", "refresh:ok"),
			policy: limits(2, 3),
			want:   []string{"j2-refresh-ok", "j1-refresh-ok"},
		},
		{
			name:   "the newest success of every op stays beyond the limit",
			jobs:   history("apply:ok", "drift:ok", "refresh:ok", "refresh:ok"),
			policy: limits(1, 3),
			want:   []string{"j2-refresh-ok"},
		},
		{
			name:   "failures beyond the limit go; deadline counts as failure",
			jobs:   history("apply:fail", "apply:deadline", "apply:fail", "apply:fail"),
			policy: limits(3, 2),
			want:   []string{"j1-apply-deadline", "j0-apply-fail"},
		},
		{
			name:   "the newest failure stays while no newer success exists",
			jobs:   history("refresh:fail", "refresh:ok", "apply:ok", "apply:fail"),
			policy: limits(0, 0),
			want:   []string{"j0-refresh-fail"},
		},
		{
			name:   "a failure older than the op's newest success is not protected",
			jobs:   history("apply:fail", "apply:ok"),
			policy: limits(3, 0),
			want:   []string{"j0-apply-fail"},
		},
		{
			// Issue 25: a held plan's Job completes, but it applied nothing.
			name:   "a held plan is no success: the newest real success stays",
			jobs:   history("apply:ok", "apply:held", "apply:held"),
			policy: limits(0, 1),
			want:   []string{"j1-apply-held"},
		},
		{
			name:   "active Jobs and Jobs whose result is not recorded stay",
			jobs:   history("refresh:ok", "refresh:ok:new", "refresh:active", "refresh:ok"),
			policy: limits(1, 1),
			want:   []string{"j0-refresh-ok"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(names(PruneCandidates(tt.jobs, tt.policy))).To(Equal(tt.want))
		})
	}
}

func TestPrune(t *testing.T) {
	g := NewWithT(t)
	jobs := history("refresh:ok", "refresh:ok", "refresh:ok")
	var objs []client.Object
	for i := range jobs {
		objs = append(objs, &jobs[i])
	}
	var deletes []string
	var propagation []metav1.DeletionPropagation
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs[1:]...).Build(), interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			o := &client.DeleteOptions{}
			o.ApplyOptions(opts)
			deletes = append(deletes, obj.GetName())
			propagation = append(propagation, *o.PropagationPolicy)
			return c.Delete(ctx, obj, opts...)
		},
	})
	// The oldest is already gone (deleted by a pass that crashed): not an error.
	deleted, err := Prune(context.Background(), c, jobs, Policy{SuccessfulJobsHistoryLimit: 1})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deleted).To(Equal([]string{"j1-refresh-ok", "j0-refresh-ok"}))
	g.Expect(deletes).To(Equal(deleted))
	g.Expect(propagation).To(HaveEach(metav1.DeletePropagationBackground))
}
