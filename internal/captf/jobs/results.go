package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/runresult"
)

// Phase is where a Job stands.
type Phase string

const (
	// PhaseActive: the Job has not finished (including a failing Job whose Pod still stops).
	PhaseActive Phase = "Active"
	// PhaseSucceeded: the runner exited 0.
	PhaseSucceeded Phase = "Succeeded"
	// PhaseFailed: the runner failed (its result says why) or the Pod never ran it.
	PhaseFailed Phase = "Failed"
	// PhaseDeadlineExceeded: the Job ran past activeDeadlineSeconds and was stopped; the
	// module may have been interrupted mid-step, which is not the module's failure.
	PhaseDeadlineExceeded Phase = "DeadlineExceeded"
)

// Finished reports whether the phase is final.
func (p Phase) Finished() bool { return p != PhaseActive }

// Classify reads a Job's phase from its conditions. Only the final Complete and Failed
// conditions count: FailureTarget and SuccessCriteriaMet come while the Pod may still be
// stopping, and a Job is not over (nor its lease free) until its Pod is.
func Classify(job *batchv1.Job) Phase {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return PhaseSucceeded
		case batchv1.JobFailed:
			if c.Reason == batchv1.JobReasonDeadlineExceeded {
				return PhaseDeadlineExceeded
			}
			return PhaseFailed
		}
	}
	return PhaseActive
}

// FinishedAt is when a finished Job finished (zero while it runs).
func FinishedAt(job *batchv1.Job) time.Time {
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// ErrNoResult: the Job left no result document to read: its Pod is gone (the Job controller
// deletes the Pod of a Job past its deadline) or its module container never terminated.
var ErrNoResult = errors.New("the Job left no result")

// Outcome is what a finished Job did.
type Outcome struct {
	// Phase of the Job.
	Phase Phase
	// Result is the runner's result document; nil when ResultErr says why there is none.
	Result *runresult.Result
	// ResultErr is ErrNoResult, runresult.ErrEmpty (the runner wrote nothing: it was killed or
	// never started) or a decode error (the message is not a result document).
	ResultErr error
	// ImageID is the module image the Pod ran, as the kubelet resolved it (for digest pinning).
	ImageID string
}

// ReadOutcome reads a finished Job's outcome: its phase and the result document the runner
// left in the module container's termination message. A missing or undecodable result is
// reported in Outcome.ResultErr, not as an error: the Job is over either way. The error is
// for failures to list the Pods, to retry.
func ReadOutcome(ctx context.Context, c client.Reader, job *batchv1.Job) (Outcome, error) {
	out := Outcome{Phase: Classify(job)}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)}); err != nil {
		return out, fmt.Errorf("jobs: list Pods of Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	// The controller-uid label is only a label: anyone who can create Pods in the namespace can
	// set it. Only a Pod the Job controls can speak for the Job (a forged one could otherwise
	// write the plan summary an approver reads).
	owned := pods.Items[:0]
	for _, pod := range pods.Items {
		if ref := metav1.GetControllerOf(&pod); ref != nil && ref.UID == job.UID && ref.Kind == "Job" {
			owned = append(owned, pod)
		}
	}
	status := terminatedSource(owned)
	if status == nil {
		out.ResultErr = fmt.Errorf("jobs: read result of Job %s/%s: %w", job.Namespace, job.Name, ErrNoResult)
		return out, nil
	}
	out.ImageID = status.ImageID
	res, err := runresult.Decode([]byte(status.State.Terminated.Message))
	if err != nil {
		out.ResultErr = fmt.Errorf("jobs: read result of Job %s/%s (exit code %d): %w", job.Namespace, job.Name, status.State.Terminated.ExitCode, err)
		return out, nil
	}
	out.Result = &res
	return out, nil
}

// terminatedSource returns the terminated module container of the newest Pod that has one.
func terminatedSource(pods []corev1.Pod) *corev1.ContainerStatus {
	var best *corev1.ContainerStatus
	var bestTime time.Time
	for i := range pods {
		for j := range pods[i].Status.ContainerStatuses {
			s := &pods[i].Status.ContainerStatuses[j]
			if s.Name != SourceContainer || s.State.Terminated == nil {
				continue
			}
			if t := pods[i].CreationTimestamp.Time; best == nil || t.After(bestTime) {
				best, bestTime = s, t
			}
		}
	}
	return best
}

// PodsAlive reports whether any Pod of the named Job may still run: one that has not reached
// Succeeded or Failed, which includes a terminating Pod (its containers may still be saving
// state within their grace period, after the Job itself is gone). Pods are found by the Job
// controller's job-name label, so they count even when the Job was deleted; a Pod that merely
// carries the label counts too, which errs on the side of waiting.
func PodsAlive(ctx context.Context, c client.Reader, namespace, jobName string) (bool, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels{batchv1.JobNameLabel: jobName}); err != nil {
		return false, fmt.Errorf("jobs: list Pods of Job %s/%s: %w", namespace, jobName, err)
	}
	for i := range pods.Items {
		if PodAlive(&pods.Items[i]) {
			return true, nil
		}
	}
	return false, nil
}

// PodAlive reports a Pod whose containers may still run: its phase is not final (a
// terminating Pod stays Running until its containers exit), or a container still reports
// running.
func PodAlive(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		return true
	}
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, s := range statuses {
			if s.State.Running != nil {
				return true
			}
		}
	}
	return false
}
