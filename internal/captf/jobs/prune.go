package jobs

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// List returns the owner's Jobs, newest first. The owner-name label is hashed for long names,
// so the Jobs are also checked against their controller reference.
func List(ctx context.Context, c client.Reader, o Owner) ([]batchv1.Job, error) {
	list := &batchv1.JobList{}
	if err := c.List(ctx, list, client.InNamespace(o.Namespace), o.Selector()); err != nil {
		return nil, fmt.Errorf("jobs: list Jobs of %s %s/%s: %w", o.Kind, o.Namespace, o.Name, err)
	}
	jobs := slices.DeleteFunc(list.Items, func(j batchv1.Job) bool {
		ref := metav1.GetControllerOfNoCopy(&j)
		return ref == nil || !o.IsOwnedBy(*ref)
	})
	SortNewestFirst(jobs)
	return jobs, nil
}

// SortNewestFirst orders Jobs by creation time, newest first; Jobs created in the same second
// by attempt, then name, so the order is total.
func SortNewestFirst(jobs []batchv1.Job) {
	slices.SortStableFunc(jobs, func(a, b batchv1.Job) int {
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		if c := cmp.Compare(attempt(b), attempt(a)); c != 0 {
			return c
		}
		return strings.Compare(b.Name, a.Name)
	})
}

func attempt(j batchv1.Job) int {
	n, _ := strconv.Atoi(j.Labels[captfv1.AttemptLabel])
	return n
}

// PruneCandidates returns the Jobs history pruning deletes, from Jobs sorted newest first.
// Only finished Jobs whose result was recorded (annotated captf.io/bookkept) are candidates:
// deleting one before that would lose its result. Of those, the newest SuccessfulJobsHistoryLimit
// successes and FailedJobsHistoryLimit others (failures, held plans) are kept, and always, per operation, the newest
// success and, while no newer success of that operation exists, the newest failure: the
// decision reads the last outcome of each operation (and counts failures for backoff) from
// them, so they must outlive any limit.
func PruneCandidates(jobs []batchv1.Job, p Policy) []batchv1.Job {
	type seen struct{ success, failure bool }
	byOp := map[string]*seen{}
	var successes, failures int32
	var prune []batchv1.Job
	for _, j := range jobs {
		phase := Classify(&j)
		if !phase.Finished() {
			continue
		}
		op := j.Labels[captfv1.OperationLabel]
		s := byOp[op]
		if s == nil {
			s = &seen{}
			byOp[op] = s
		}
		var protected bool
		var count *int32
		limit := p.SuccessfulJobsHistoryLimit
		if succeeded(&j, phase) {
			protected, s.success = !s.success, true
			count = &successes
		} else {
			protected = !s.success && !s.failure
			s.failure = true
			count, limit = &failures, p.FailedJobsHistoryLimit
		}
		*count++
		_, bookkept := j.Annotations[captfv1.BookkeptAnnotation]
		if protected || *count <= limit || !bookkept {
			continue
		}
		prune = append(prune, j)
	}
	return prune
}

// succeeded reports a Job that did its work. An apply that held its plan for approval ends its
// Job successfully but applied nothing: recorded Blocked, it counts with the Jobs that did not
// succeed, so it never takes the place of the newest real success.
func succeeded(j *batchv1.Job, phase Phase) bool {
	return phase == PhaseSucceeded && j.Annotations[captfv1.BookkeptAnnotation] != string(captfv1.RunBlocked)
}

// Prune deletes the PruneCandidates of jobs (sorted newest first) and returns their names.
// Deletion propagates in the background, so the Job's Pods and its per-run Secret go too.
func Prune(ctx context.Context, c client.Client, jobs []batchv1.Job, p Policy) ([]string, error) {
	var deleted []string
	for _, j := range PruneCandidates(jobs, p) {
		err := c.Delete(ctx, &j, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &j.UID})
		if err != nil && !apierrors.IsNotFound(err) {
			return deleted, fmt.Errorf("jobs: delete Job %s/%s: %w", j.Namespace, j.Name, err)
		}
		deleted = append(deleted, j.Name)
	}
	return deleted, nil
}
