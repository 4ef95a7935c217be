package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
)

// Admission judges a Job's Pods only when the Job controller creates them: a ResourceQuota on
// pods, Pod Security admission or a policy on Pods refuse those, not the Job, and the Job then
// waits without a Pod until its deadline. The engine asks first, with a dry run of the Job's Pod,
// and watches a running Job that has no Pod for the Job controller's FailedCreate events.

// podPending is how often a running Job without a Pod is looked at again.
const podPending = 10 * time.Second

// podRefusal is admission's refusal of a Job's Pods.
type podRefusal struct {
	reason string
	err    error
}

func (e *podRefusal) Error() string { return e.err.Error() }
func (e *podRefusal) Unwrap() error { return e.err }

// dryRunPod asks the API server to admit one of the Job's Pods, in the Job's namespace and
// with its ServiceAccount, without creating it. A refusal is a *podRefusal.
func (e *engine) dryRunPod(ctx context.Context, job *batchv1.Job) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: job.Namespace, GenerateName: job.Name + "-",
			Labels: job.Spec.Template.Labels, Annotations: job.Spec.Template.Annotations,
		},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
	err := e.client.Create(ctx, pod, client.DryRunAll)
	if err == nil {
		return nil
	}
	if reason := podRefusalReason(err); reason != "" {
		return &podRefusal{reason: reason, err: err}
	}
	return fmt.Errorf("dry-run a Pod of Job %s: %w", job.Name, err)
}

// podRefusalReason tells a quota, Pod Security and any other admission refusal of a Pod apart;
// "" for an error that is not a refusal.
func podRefusalReason(err error) string {
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		return ""
	}
	return refusalReason(err.Error())
}

func refusalReason(msg string) string {
	switch {
	case strings.Contains(msg, "violates PodSecurity"):
		return captfv1.PodSecurityRefusedReason
	case strings.Contains(msg, "exceeded quota"), strings.Contains(msg, "failed quota"),
		strings.Contains(msg, "status unknown for quota"):
		return captfv1.PodQuotaExceededReason
	}
	return captfv1.PodsRefusedReason
}

// startRefusal is the reason of an admission refusal that a start waits on (decide's
// Start.LastRefusal): a refusal of the Job's Pods, or a ResourceQuota's of the Job or its
// Secret; "" for any other error.
func startRefusal(err error) string {
	var refusal *podRefusal
	switch {
	case errors.As(err, &refusal):
		return refusal.reason
	case apierrors.IsForbidden(err) && isQuotaError(err):
		return captfv1.QuotaExceededReason
	}
	return ""
}

// podRefusalMessage is the ApplyJobSucceeded message of a refusal of a Job's Pods.
func podRefusalMessage(err error) string {
	var refusal *podRefusal
	if errors.As(err, &refusal) {
		return "Admission refused the Job's Pods, so no Job was started: " + refusal.err.Error()
	}
	return "Admission refused the Job's Pods: " + errText(err)
}

// watchPodless reports a running Job that has no Pod because the Job controller's creation of
// its Pods was refused, from the Job controller's FailedCreate events (read live, only while the
// Job has no Pod); such a Job is looked at again every podPending until it has a Pod. The Job is
// left to run: the refusal may pass (a quota freed), and its deadline still ends it.
func watchPodless[T capi.Object](ctx context.Context, e *engine, p *pass[T]) error {
	job := p.active
	if job == nil || job.Status.Active > 0 || ptr.Deref(job.Status.Ready, 0) > 0 || job.Status.Succeeded > 0 ||
		job.Status.Failed > 0 || ptr.Deref(job.Status.Terminating, 0) > 0 {
		return nil
	}
	p.requeueAfter(podPending)
	events := &corev1.EventList{}
	if err := e.reader.List(ctx, events, client.InNamespace(job.Namespace),
		client.MatchingFields{"involvedObject.uid": string(job.UID), "reason": "FailedCreate"}); err != nil {
		return fmt.Errorf("list the events of Job %s: %w", job.Name, err)
	}
	var newest *corev1.Event
	for i := range events.Items {
		if ev := &events.Items[i]; newest == nil || eventTime(ev).After(eventTime(newest)) {
			newest = ev
		}
	}
	if newest == nil {
		return nil
	}
	p.podsRefused = &podRefusal{reason: refusalReason(newest.Message),
		err: fmt.Errorf("Job %s has no Pod: the Job controller's creation of its Pods was refused: %s", job.Name, newest.Message)}
	return nil
}

func eventTime(ev *corev1.Event) time.Time {
	switch {
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	}
	return ev.CreationTimestamp.Time
}
