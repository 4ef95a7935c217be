package controllers

import (
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/captf/runresult"
)

// markNotPersisted records on a finished Job that its state could not be saved (the runner's
// state-not-persisted), with the errored state's compressed size, so the hold outlives the Pod.
func markNotPersisted(job *batchv1.Job, rr *runresult.Result) {
	if rr == nil || rr.Error == nil || rr.Error.Kind != runresult.KindStateNotPersisted {
		return
	}
	var n int64
	if rr.ErroredState != nil {
		n = rr.ErroredState.CompressedBytes
	}
	job.Annotations[captfv1.StateNotPersistedAnnotation] = strconv.FormatInt(n, 10)
}

// notPersisted finds the newest recorded Job that writes state (every operation but plan); when
// it could not save its state and the object's captf.io/state-recovered does not name it, it
// returns the hold's reason and the Job.
func notPersisted(list []batchv1.Job, recovered string) (string, *batchv1.Job) {
	for i := range list { // newest first
		j := &list[i]
		if j.Annotations[captfv1.BookkeptAnnotation] == "" || j.Labels[captfv1.OperationLabel] == string(captfv1.OperationPlan) {
			continue
		}
		v, ok := j.Annotations[captfv1.StateNotPersistedAnnotation]
		if !ok || j.Name == recovered {
			return "", nil
		}
		if n, _ := strconv.ParseInt(v, 10, 64); n > runresult.SecretDataLimit {
			return captfv1.StateTooLargeReason, j
		}
		return captfv1.StateNotPersistedReason, j
	}
	return "", nil
}

// notPersistedMessage says what happened and what the operator does about it.
func notPersistedMessage[T capi.Object](p *pass[T]) string {
	obj := p.scope.Object
	reason, job := notPersisted(p.jobList, obj.GetAnnotations()[captfv1.StateRecoveredAnnotation])
	if job == nil {
		return ""
	}
	size, _ := strconv.ParseInt(job.Annotations[captfv1.StateNotPersistedAnnotation], 10, 64)
	what := "the backend refused it"
	if reason == captfv1.StateTooLargeReason {
		what = fmt.Sprintf("it is %.2f MiB compressed and OpenTofu's kubernetes backend keeps it in one Secret, which holds at most 1 MiB", float64(size)/(1<<20))
	}
	return fmt.Sprintf("%s Job %s changed infrastructure but could not save its state: %s. What it created is recorded only "+
		"in that unsaved state, so nothing runs again: a retry would create it a second time. status.lastRun.error and "+
		"the Job's Pod log say more. Shrink the module's state and remove or import what the run created, then resume with "+
		"`kubectl annotate %s %s -n %s %s=%s --overwrite`",
		job.Labels[captfv1.OperationLabel], job.Name, what, strings.ToLower(p.owner.Kind), obj.GetName(), obj.GetNamespace(),
		captfv1.StateRecoveredAnnotation, job.Name)
}
