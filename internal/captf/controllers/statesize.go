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
	if rr.ErroredState != nil && rr.ErroredState.Kept != "" {
		job.Annotations[erroredBackupAnnotation] = rr.ErroredState.Kept
	}
}

// erroredBackupAnnotation on a Job marked StateNotPersistedAnnotation names the state backup set
// in which the runner kept the state it could not save.
const erroredBackupAnnotation = "captf.io/errored-state-backup"

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
	kept := "The runner could not keep a copy of it (status.lastRun.error and the Job's Pod log say why)."
	if set := job.Annotations[erroredBackupAnnotation]; set != "" {
		kept = fmt.Sprintf("A copy is kept as state backup %s (`kubectl captf backups list %s -n %s`).", set, obj.GetName(), obj.GetNamespace())
		if serial, ok := keptSerial(p, set); ok && reason == captfv1.StateNotPersistedReason {
			kept += fmt.Sprintf(" Restoring it also resumes runs: `kubectl captf backups restore %s -n %s --serial %d --yes`.", obj.GetName(), obj.GetNamespace(), serial)
		}
	}
	return fmt.Sprintf("%s Job %s changed infrastructure but could not save its state: %s. What it created is recorded only "+
		"in that unsaved state, so nothing runs again: a retry would create it a second time. %s "+
		"Shrink the module's state (or remove or import what the run created) and then resume with "+
		"`kubectl annotate %s %s -n %s %s=%s --overwrite`",
		job.Labels[captfv1.OperationLabel], job.Name, what, kept, strings.ToLower(p.owner.Kind), obj.GetName(), obj.GetNamespace(),
		captfv1.StateRecoveredAnnotation, job.Name)
}

// keptSerial is the serial of a complete backup set the pass listed.
func keptSerial[T capi.Object](p *pass[T], name string) (int64, bool) {
	for _, b := range p.backups {
		if b.Name == name && b.Complete {
			return b.Serial, true
		}
	}
	return 0, false
}
