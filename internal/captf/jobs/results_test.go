package jobs

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/capx-io/capx/internal/captf/runresult"
	"github.com/capx-io/capx/internal/scheme"
)

func condition(t batchv1.JobConditionType, reason string) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.Unix(100, 0)}
}

func jobWith(conds ...batchv1.JobCondition) *batchv1.Job {
	return &batchv1.Job{Status: batchv1.JobStatus{Conditions: conds}}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		job  *batchv1.Job
		want Phase
	}{
		{"new", jobWith(), PhaseActive},
		{"suspended", jobWith(condition(batchv1.JobSuspended, "")), PhaseActive},
		{"failing, Pod still stopping", jobWith(condition(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded)), PhaseActive},
		{"succeeding, Pod still stopping", jobWith(condition(batchv1.JobSuccessCriteriaMet, "")), PhaseActive},
		{"complete", jobWith(condition(batchv1.JobSuccessCriteriaMet, ""), condition(batchv1.JobComplete, "")), PhaseSucceeded},
		{"failed", jobWith(condition(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded), condition(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)), PhaseFailed},
		{"past its deadline", jobWith(condition(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded)), PhaseDeadlineExceeded},
		{"a condition that is not true", jobWith(batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionFalse}), PhaseActive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(Classify(tt.job)).To(Equal(tt.want))
			g.Expect(tt.want.Finished()).To(Equal(!FinishedAt(tt.job).IsZero()))
		})
	}
}

func TestReadOutcome(t *testing.T) {
	ok, err := runresult.Encode(runresult.Result{Op: "apply", Changes: &runresult.Changes{Add: 1}})
	if err != nil {
		t.Fatal(err)
	}
	failed, err := runresult.Encode(runresult.Result{Op: "apply", Error: &runresult.Error{Kind: runresult.KindStep, Step: "apply"}})
	if err != nil {
		t.Fatal(err)
	}
	pod := func(name string, created int64, state corev1.ContainerState) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.Unix(created, 0),
				Labels: map[string]string{batchv1.ControllerUidLabel: "job-uid"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "captf-m-m1-apply-a1-abcdef",
					UID: "job-uid", Controller: ptr.To(true)}}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
				{Name: RunnerContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: "not this one"}}},
				{Name: SourceContainer, ImageID: "registry.example/m@sha256:" + name, State: state},
			}},
		}
	}
	terminated := func(msg string, code int32) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg, ExitCode: code}}
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}

	tests := []struct {
		name    string
		job     *batchv1.Job
		pods    []*corev1.Pod
		phase   Phase
		result  *runresult.Result
		err     error
		imageID string
	}{
		{
			name: "success", job: jobWith(condition(batchv1.JobComplete, "")),
			pods:  []*corev1.Pod{pod("p1", 1, terminated(string(ok), 0))},
			phase: PhaseSucceeded, result: &runresult.Result{Version: 1, Op: "apply", Changes: &runresult.Changes{Add: 1}},
			imageID: "registry.example/m@sha256:p1",
		},
		{
			name: "a failed step", job: jobWith(condition(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)),
			pods:  []*corev1.Pod{pod("p1", 1, terminated(string(failed), 1))},
			phase: PhaseFailed, result: &runresult.Result{Version: 1, Op: "apply", Error: &runresult.Error{Kind: "step", Step: "apply"}},
			imageID: "registry.example/m@sha256:p1",
		},
		{
			name: "the newest Pod counts", job: jobWith(condition(batchv1.JobFailed, "")),
			pods:  []*corev1.Pod{pod("p2", 2, terminated(string(failed), 1)), pod("p1", 1, terminated(string(ok), 0)), pod("p3", 3, running)},
			phase: PhaseFailed, result: &runresult.Result{Version: 1, Op: "apply", Error: &runresult.Error{Kind: "step", Step: "apply"}},
			imageID: "registry.example/m@sha256:p2",
		},
		{
			name: "past the deadline, the Pod deleted", job: jobWith(condition(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded)),
			phase: PhaseDeadlineExceeded, err: ErrNoResult,
		},
		{
			name: "killed before it wrote a result", job: jobWith(condition(batchv1.JobFailed, "")),
			pods:  []*corev1.Pod{pod("p1", 1, terminated("", 137))},
			phase: PhaseFailed, err: runresult.ErrEmpty, imageID: "registry.example/m@sha256:p1",
		},
		{
			name: "garbage", job: jobWith(condition(batchv1.JobFailed, "")),
			pods:  []*corev1.Pod{pod("p1", 1, terminated("Error: sensitive module output", 1))},
			phase: PhaseFailed, err: errors.New("not a result document"), imageID: "registry.example/m@sha256:p1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			b := fake.NewClientBuilder().WithScheme(scheme.New())
			for _, p := range tt.pods {
				b = b.WithObjects(p)
			}
			// A Pod of another Job is never read.
			other := pod("other", 9, terminated(string(ok), 0))
			other.Labels[batchv1.ControllerUidLabel] = "other-uid"
			other.OwnerReferences[0].UID = "other-uid"
			// Nor a Pod that carries the Job's label but that the Job does not control: anyone
			// who can create Pods could forge a result (a plan summary) that way.
			forged := pod("forged", 10, terminated(string(ok), 0))
			forged.OwnerReferences = nil
			notController := pod("not-controller", 11, terminated(string(ok), 0))
			notController.OwnerReferences[0].Controller = nil
			c := b.WithObjects(other, forged, notController).Build()
			job := tt.job
			job.Namespace, job.Name, job.UID = "ns", "captf-m-m1-apply-a1-abcdef", "job-uid"

			out, err := ReadOutcome(context.Background(), c, job)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out.Phase).To(Equal(tt.phase))
			g.Expect(out.ImageID).To(Equal(tt.imageID))
			if tt.err == nil {
				g.Expect(out.ResultErr).NotTo(HaveOccurred())
				g.Expect(out.Result).To(Equal(tt.result))
				return
			}
			g.Expect(out.Result).To(BeNil())
			g.Expect(out.ResultErr).To(HaveOccurred())
			if errors.Is(tt.err, ErrNoResult) || errors.Is(tt.err, runresult.ErrEmpty) {
				g.Expect(errors.Is(out.ResultErr, tt.err)).To(BeTrue(), "%v", out.ResultErr)
			} else {
				g.Expect(out.ResultErr.Error()).To(ContainSubstring(tt.err.Error()))
			}
			g.Expect(out.ResultErr.Error()).NotTo(ContainSubstring("sensitive"), "the message is never quoted")
		})
	}
}
