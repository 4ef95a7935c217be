package controllers

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

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
// returns the hold's reason and the Job. A hold recorded on the object (its
// captf.io/state-not-persisted-hold) whose Job is gone holds as well, unless a state-writing Job
// recorded after it replaced the state: the Job of a hold stands in for the missing one.
func notPersisted(list []batchv1.Job, annotations map[string]string) (string, *batchv1.Job) {
	recovered := annotations[captfv1.StateRecoveredAnnotation]
	held, hasHold := decodeHold(annotations[captfv1.StateNotPersistedHoldAnnotation])
	for i := range list { // newest first
		j := &list[i]
		if j.Annotations[captfv1.BookkeptAnnotation] == "" || j.Labels[captfv1.OperationLabel] == string(captfv1.OperationPlan) {
			continue
		}
		if hasHold && j.Name != held.Name && j.CreationTimestamp.Time.Before(held.CreationTimestamp.Time) {
			break // older than the held run, whose Job is gone: the hold decides
		}
		v, ok := j.Annotations[captfv1.StateNotPersistedAnnotation]
		if !ok || j.Name == recovered {
			return "", nil
		}
		return holdReason(v), j
	}
	if !hasHold || held.Name == recovered {
		return "", nil
	}
	return holdReason(held.Annotations[captfv1.StateNotPersistedAnnotation]), held
}

// holdReason tells a state too large for a Secret from one the backend refused otherwise.
func holdReason(compressedBytes string) string {
	if n, _ := strconv.ParseInt(compressedBytes, 10, 64); n > runresult.SecretDataLimit {
		return captfv1.StateTooLargeReason
	}
	return captfv1.StateNotPersistedReason
}

// hold is the object's copy of a held run (captf.io/state-not-persisted-hold).
type hold struct {
	Job        string    `json:"job"`
	Operation  string    `json:"operation"`
	Bytes      int64     `json:"compressedBytes"`
	KeptBackup string    `json:"keptBackup,omitempty"`
	Recorded   time.Time `json:"recorded"`
}

// encodeHold is the annotation value for the held Job j.
func encodeHold(j *batchv1.Job) string {
	n, _ := strconv.ParseInt(j.Annotations[captfv1.StateNotPersistedAnnotation], 10, 64)
	b, _ := json.Marshal(hold{Job: j.Name, Operation: j.Labels[captfv1.OperationLabel], Bytes: n,
		KeptBackup: j.Annotations[erroredBackupAnnotation], Recorded: j.CreationTimestamp.UTC()})
	return string(b)
}

// decodeHold turns the annotation back into the Job it stands for; an unreadable value holds
// nothing (it is rewritten from the Job while that exists).
func decodeHold(v string) (*batchv1.Job, bool) {
	var h hold
	if v == "" || json.Unmarshal([]byte(v), &h) != nil || h.Job == "" {
		return nil, false
	}
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Name:              h.Job,
		CreationTimestamp: metav1.NewTime(h.Recorded),
		Labels:            map[string]string{captfv1.OperationLabel: h.Operation},
		Annotations: map[string]string{
			captfv1.BookkeptAnnotation:          string(captfv1.RunFailed),
			captfv1.StateNotPersistedAnnotation: strconv.FormatInt(h.Bytes, 10),
		},
	}}
	if h.KeptBackup != "" {
		j.Annotations[erroredBackupAnnotation] = h.KeptBackup
	}
	return j, true
}

// syncHold keeps the object's copy of the hold in step with the Jobs: written while a held Job
// exists, removed once nothing holds. The object's patch at the end of the pass saves it.
func syncHold(obj interface {
	GetAnnotations() map[string]string
	SetAnnotations(map[string]string)
}, list []batchv1.Job) {
	annotations := obj.GetAnnotations()
	_, job := notPersisted(list, annotations)
	want := ""
	if job != nil {
		want = encodeHold(job)
	}
	if annotations[captfv1.StateNotPersistedHoldAnnotation] == want {
		return
	}
	annotations = maps.Clone(annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	if want == "" {
		delete(annotations, captfv1.StateNotPersistedHoldAnnotation)
	} else {
		annotations[captfv1.StateNotPersistedHoldAnnotation] = want
	}
	obj.SetAnnotations(annotations)
}

// notPersistedMessage says what happened and what the operator does about it.
func notPersistedMessage[T capi.Object](p *pass[T]) string {
	obj := p.scope.Object
	reason, job := notPersisted(p.jobList, obj.GetAnnotations())
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

// nearLimitPercent is the share of a Secret's 1 MiB past which StateNearSecretLimit warns.
const nearLimitPercent = 75

// stateBytesMetric is captf_state_bytes: the compressed size of each object's state, as its
// Secrets hold it.
var stateBytesMetric = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "captf_state_bytes",
	Help: "Compressed size of a CAPTF object's state as its Secrets hold it; one Secret holds at most 1048576 bytes.",
}, []string{"namespace", "kind", "name"})

func init() { metrics.Registry.MustRegister(stateBytesMetric) }

// stateSizeCondition says how close the state is to what one Secret holds, from the state the
// pass read (ok=false when it read none, e.g. while a Job runs: the last report stands).
func stateSizeCondition(bytes int64) (metav1.ConditionStatus, string, string) {
	pct := bytes * 100 / runresult.SecretDataLimit
	size := fmt.Sprintf("The state is %.2f MiB compressed, %d%% of the 1 MiB one state Secret holds", float64(bytes)/(1<<20), pct)
	if pct < nearLimitPercent {
		return metav1.ConditionFalse, captfv1.StateSizeWithinLimitReason, size
	}
	return metav1.ConditionTrue, captfv1.StateNearSecretLimitReason, size + ": OpenTofu's kubernetes backend keeps the state " +
		"in one Secret, so the apply that grows it past 1 MiB cannot save it and the object holds (StateTooLarge). " +
		"Shrink what the module keeps in its state (fewer or smaller resource attributes) or split the module"
}

// setStateSize reports the state's size: status.stateBytes, StateNearSecretLimit and the
// metric, from the state the pass read (none while a Job runs: the last report stands). After a
// run that could not save a state too large for a Secret, the condition reports that state. A
// deleted object's series goes with its finalizer.
func setStateSize[T capi.Object](p *pass[T], set func(t string, s metav1.ConditionStatus, reason, msg string)) {
	obj := p.scope.Object
	labels := []string{obj.GetNamespace(), p.owner.Kind, obj.GetName()}
	if p.decision.Finalize || p.decision.Retain {
		stateBytesMetric.DeleteLabelValues(labels...)
		return
	}
	if p.snap != nil {
		n := p.snap.Bytes
		p.status.StateBytes = &n
		stateBytesMetric.WithLabelValues(labels...).Set(float64(n))
		s, reason, msg := stateSizeCondition(n)
		set(captfv1.StateNearSecretLimitCondition, s, reason, msg)
	}
	if reason, job := notPersisted(p.jobList, obj.GetAnnotations()); reason == captfv1.StateTooLargeReason {
		size, _ := strconv.ParseInt(job.Annotations[captfv1.StateNotPersistedAnnotation], 10, 64)
		_, _, msg := stateSizeCondition(size)
		set(captfv1.StateNearSecretLimitCondition, metav1.ConditionTrue, captfv1.StateNearSecretLimitReason,
			"The state Job "+job.Name+" could not save is "+strings.TrimPrefix(msg, "The state is "))
	}
}
