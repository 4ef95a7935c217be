package controllers

import (
	"context"
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/decide"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/runresult"
)

// Annotations the engine records on a finished Job at bookkeeping, so later passes (and the
// kubectl plugin) read a Job's outcome without its Pod, which may be gone.
const (
	driftAnnotation     = "captf.io/drift-resources"
	planEmptyAnnotation = "captf.io/plan-empty"
	// withdrawnAnnotation marks a restore Job whose request (the captf.io/restore-state
	// annotation) was removed since: it no longer answers a new request for the same serial.
	withdrawnAnnotation = "captf.io/restore-withdrawn"
	// errorKindAnnotation and errorAnnotation are a Job's status.lastRun.error (kind, and the
	// runner's redacted summary): on the Job, in the same write as its result, every pass that
	// sees the result sees its error, although the object it reads from the cache may still show
	// an older status.lastRun.
	errorKindAnnotation = "captf.io/error-kind"
	errorAnnotation     = "captf.io/error"
)

// listJobs lists the object's Jobs from the cache and finds the running one.
func (r *provider[T]) listJobs(ctx context.Context, p *pass[T]) error {
	list, err := jobs.List(ctx, r.client, p.owner)
	if err != nil {
		return err
	}
	jobs.SortNewestFirst(list)
	p.jobList = list
	for i := range list {
		if jobs.Classify(&list[i]) == jobs.PhaseActive {
			p.active = &list[i]
			break
		}
	}
	return nil
}

// bookkeep records every finished Job not recorded yet: it reads the runner's result, applies
// what the operation changed (adopting an applied state, recording a plan), releases the Job's
// leases, and marks the Job with its result. The mark comes last, so a pass that fails midway
// does it all again (every step is idempotent).
func (r *provider[T]) bookkeep(ctx context.Context, p *pass[T]) error {
	if err := r.recordFinished(ctx, p, false); err != nil {
		return err
	}
	if err := r.withdrawRestores(ctx, p); err != nil {
		return err
	}
	if _, err := jobs.Prune(ctx, r.client, p.jobList, p.policy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Pruning finished Jobs failed; retrying on the next reconcile")
	}
	return nil
}

// bookkeepPaused is bookkeep for a paused object: it records what decide.RecordedWhilePaused
// allows and creates or deletes nothing (no plan, no lease released, no Job pruned).
func (r *provider[T]) bookkeepPaused(ctx context.Context, p *pass[T]) error {
	if err := r.recordFinished(ctx, p, true); err != nil {
		return err
	}
	return r.withdrawRestores(ctx, p)
}

// recordFinished records every finished Job not recorded yet, oldest first, and releases its
// leases; paused, only the Jobs decide.RecordedWhilePaused allows, and no lease.
func (r *provider[T]) recordFinished(ctx context.Context, p *pass[T], paused bool) error {
	for i := len(p.jobList) - 1; i >= 0; i-- { // oldest first
		job := &p.jobList[i]
		phase := jobs.Classify(job)
		if !phase.Finished() || job.Annotations[captfv1.BookkeptAnnotation] != "" {
			continue
		}
		outcome, err := jobs.ReadOutcome(ctx, r.reader, job)
		if err != nil {
			return err
		}
		op := captfv1.Operation(job.Labels[captfv1.OperationLabel])
		res := runResult(op, phase, outcome)
		if paused && !decide.RecordedWhilePaused(op, res) {
			// Newer Jobs wait too: a plan recorded after them would read as the newer.
			return nil
		}
		summary, err := r.recordRun(ctx, p, job, res, outcome)
		if err != nil {
			return fmt.Errorf("record Job %s: %w", job.Name, err)
		}
		if !paused {
			if err := r.releaseLeases(ctx, p, job.Name); err != nil {
				return err
			}
		}
		if err := r.markBookkept(ctx, job, summary, outcome.Result); err != nil {
			return err
		}
	}
	return nil
}

// withdrawRestores ends a restore request once its annotation is removed: the recorded restore
// Jobs stop answering for their serial and status.lastRestoredSerial clears, so setting the
// annotation again (after a failure, say) restores again.
func (r *provider[T]) withdrawRestores(ctx context.Context, p *pass[T]) error {
	if _, requested := p.scope.Object.GetAnnotations()[captfv1.RestoreStateAnnotation]; requested {
		return nil
	}
	p.status.LastRestoredSerial = nil
	for i := range p.jobList {
		job := &p.jobList[i]
		if job.Labels[captfv1.OperationLabel] != string(captfv1.OperationRestore) ||
			job.Annotations[captfv1.BookkeptAnnotation] == "" || job.Annotations[withdrawnAnnotation] != "" {
			continue
		}
		before := job.DeepCopy()
		job.Annotations[withdrawnAnnotation] = "true"
		if err := r.client.Patch(ctx, job, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// answersRestore reports whether a Job is a recorded restore of serial that still counts.
func answersRestore(j *batchv1.Job, serial string) bool {
	return j.Labels[captfv1.OperationLabel] == string(captfv1.OperationRestore) &&
		j.Annotations[captfv1.RestoreSerialAnnotation] == serial && j.Annotations[withdrawnAnnotation] == ""
}

// runResult classifies a finished Job of op. A held plan ends its Job successfully (the runner
// exits 0 for it; runners before that failed the Job): its result says it was held. So an apply
// Job that completed without a readable result may have applied nothing: recording it as a
// success would mark the state as carrying inputs it never got. It counts as failed and is
// retried (an apply that did succeed plans nothing the second time).
func runResult(op captfv1.Operation, phase jobs.Phase, o jobs.Outcome) captfv1.RunResult {
	switch {
	case o.Result != nil && o.Result.Held():
		return captfv1.RunBlocked
	case phase == jobs.PhaseSucceeded && o.Result == nil && op == captfv1.OperationApply:
		return captfv1.RunFailed
	case phase == jobs.PhaseSucceeded:
		return captfv1.RunSucceeded
	case phase == jobs.PhaseDeadlineExceeded:
		return captfv1.RunFailed
	case o.Result == nil || o.Result.Error == nil:
		return captfv1.RunFailed
	}
	switch o.Result.Error.Kind {
	case runresult.KindBlocked:
		return captfv1.RunBlocked
	case runresult.KindPlanChanged:
		return captfv1.RunPlanChanged
	case runresult.KindInterrupted:
		return captfv1.RunInterrupted
	}
	return captfv1.RunFailed
}

// recordRun applies what a finished Job changed and returns its summary (status.lastRun).
func (r *provider[T]) recordRun(ctx context.Context, p *pass[T], job *batchv1.Job, res captfv1.RunResult, o jobs.Outcome) (*captfv1.RunSummary, error) {
	op := captfv1.Operation(job.Labels[captfv1.OperationLabel])
	summary := runSummary(job, op, res, o)
	p.status.LastRun = summary
	r.event(p, job, summary)
	return summary, r.applyRun(ctx, p, job, op, res, o)
}

// applyRun applies what a finished Job of op changed: an applied or restored state, a plan.
func (r *provider[T]) applyRun(ctx context.Context, p *pass[T], job *batchv1.Job, op captfv1.Operation, res captfv1.RunResult, o jobs.Outcome) error {

	switch {
	case res == captfv1.RunSucceeded && (op == captfv1.OperationApply || op == captfv1.OperationRestore):
		// An apply records the module image it ran; a restore ran none of the module and keeps
		// the record of the newest apply.
		image := ""
		if op == captfv1.OperationApply {
			image = jobs.SourceImage(job)
		}
		if err := r.adoptState(ctx, p, job.Annotations[captfv1.InputsHashAnnotation], image); err != nil {
			return err
		}
		if op == captfv1.OperationRestore {
			serial, _ := strconv.ParseInt(job.Annotations[captfv1.RestoreSerialAnnotation], 10, 64)
			p.status.LastRestoredSerial = &serial
			// Every plan waiting was made against the state the restore replaced: none of them
			// can be what an approval lets apply now. The current inputs are planned again.
			p.status.PendingPlanRef = nil
			return r.supersedeAll(ctx, p, fmt.Sprintf("Restore Job %s replaced the state this plan was made against (with backup serial %d)", job.Name, serial))
		}
		return r.planApplied(ctx, p, job)
	case op == captfv1.OperationApply && (res == captfv1.RunBlocked || res == captfv1.RunPlanChanged):
		return r.recordPlan(ctx, p, job, res, o.Result)
	case op == captfv1.OperationPlan && res == captfv1.RunSucceeded:
		return r.recordPlan(ctx, p, job, res, o.Result)
	case op == captfv1.OperationDrift && res == captfv1.RunSucceeded:
		p.status.LastDriftCheck = &metav1.Time{Time: jobs.FinishedAt(job)}
	case op == captfv1.OperationRefresh && res == captfv1.RunSucceeded:
		p.status.LastRefresh = &metav1.Time{Time: jobs.FinishedAt(job)}
	}
	return nil
}

// runSummary is status.lastRun for a finished Job.
func runSummary(job *batchv1.Job, op captfv1.Operation, res captfv1.RunResult, o jobs.Outcome) *captfv1.RunSummary {
	s := &captfv1.RunSummary{Job: job.Name, Operation: op, Result: res}
	if t := jobs.FinishedAt(job); !t.IsZero() {
		s.FinishedAt = &metav1.Time{Time: t}
	}
	if jobs.Classify(job) == jobs.PhaseDeadlineExceeded {
		s.Error = &captfv1.RunError{Kind: "deadline", Summary: fmt.Sprintf(
			"the Job ran past activeDeadlineSeconds (%ds) and was stopped", ptrOr(job.Spec.ActiveDeadlineSeconds))}
	}
	rr := o.Result
	if rr == nil {
		if s.Error == nil && res != captfv1.RunSucceeded {
			s.Error = &captfv1.RunError{Kind: "result", Summary: resultMissing(o.ResultErr)}
		}
		return s
	}
	if rr.Changes != nil {
		s.Changes = &captfv1.ChangeCounts{Add: int32(rr.Changes.Add), Change: int32(rr.Changes.Change), Destroy: int32(rr.Changes.Destroy)}
	}
	if rr.Drift != nil {
		s.Drift = &captfv1.DriftSummary{Resources: rr.Drift.Addresses}
		s.Drift.Change = int32(rr.Drift.Resources)
	}
	if rr.Error != nil && s.Error == nil {
		s.Error = &captfv1.RunError{Kind: rr.Error.Kind, Step: rr.Error.Step, Summary: runresult.Head(rr.Error.Summary, 1024)}
	}
	return s
}

func resultMissing(err error) string {
	if err == nil {
		return "the runner left no result"
	}
	return "the runner left no readable result: " + err.Error()
}

func ptrOr(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// event reports a finished Job on the object: Normal when it did its work or held its plan for
// approval, Warning otherwise.
func (r *provider[T]) event(p *pass[T], job *batchv1.Job, s *captfv1.RunSummary) {
	kind, reason := corev1.EventTypeNormal, "JobSucceeded"
	msg := fmt.Sprintf("%s Job %s succeeded", s.Operation, job.Name)
	switch s.Result {
	case captfv1.RunSucceeded:
	case captfv1.RunBlocked:
		// A held plan is the guard working, not a failure: it waits for a decision (the
		// PlanReady Event names the TerraformPlan).
		reason = "JobBlocked"
		msg = fmt.Sprintf("%s Job %s held its plan for approval: it deletes or replaces resources; nothing was changed", s.Operation, job.Name)
	default:
		kind, reason = corev1.EventTypeWarning, "Job"+string(s.Result)
		msg = fmt.Sprintf("%s Job %s: %s", s.Operation, job.Name, s.Result)
		// Events are readable by many who cannot read Secrets: never the runtime's output, which
		// only the (redacted) status.lastRun.error.summary carries.
		if s.Error != nil {
			msg += fmt.Sprintf(" at step %s (%s); the error is in status.lastRun.error", runresult.Head(s.Error.Step, 32), runresult.Head(s.Error.Kind, 32))
		}
	}
	if s.Result == captfv1.RunSucceeded && s.Changes != nil {
		msg += fmt.Sprintf(" (%d added, %d changed, %d destroyed)", s.Changes.Add, s.Changes.Change, s.Changes.Destroy)
	}
	r.recorder.Event(p.scope.Object, kind, reason, msg)
}

// markBookkept records a Job's result, and its error if it has one, on the Job itself.
func (r *provider[T]) markBookkept(ctx context.Context, job *batchv1.Job, s *captfv1.RunSummary, rr *runresult.Result) error {
	before := job.DeepCopy()
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[captfv1.BookkeptAnnotation] = string(s.Result)
	if e := s.Error; e != nil {
		job.Annotations[errorKindAnnotation] = e.Kind
		job.Annotations[errorAnnotation] = e.Summary
	}
	if rr != nil && rr.Drift != nil {
		job.Annotations[driftAnnotation] = strconv.Itoa(rr.Drift.Resources)
	}
	markNotPersisted(job, rr)
	if rr != nil && rr.Plan != nil && rr.PlanHash != "" {
		job.Annotations[captfv1.PlanHashAnnotation] = rr.PlanHash
		if planIsEmpty(rr.Plan) {
			job.Annotations[planEmptyAnnotation] = "true"
		}
	}
	return client.IgnoreNotFound(r.client.Patch(ctx, job, client.MergeFrom(before)))
}

// planIsEmpty reports a plan that changes no resource. Output changes alone do not count: they
// change nothing an approval guards, and applying them only records the new values.
func planIsEmpty(s *runresult.PlanSummary) bool {
	return s.Create+s.Update+s.Replace+s.Delete == 0
}

// trackActiveJob keeps clusterctl move's block-move annotation exactly as long as a Job runs,
// hands a running Job its run Secret (a pass that crashed after creating the Job could not),
// and records the Job in status.activeJob. That a running Job owns the object is decided by
// decide.Next; the phases that read the state do not run meanwhile (whileIdle).
func (r *provider[T]) trackActiveJob(ctx context.Context, p *pass[T]) error {
	if err := r.setBlockMove(ctx, p, p.active != nil); err != nil {
		return err
	}
	if p.active == nil {
		p.status.ActiveJob = nil
		return nil
	}
	if err := r.ownRunSecret(ctx, p.active); err != nil {
		return err
	}
	p.status.ActiveJob = &captfv1.JobReference{
		Name: p.active.Name, Operation: captfv1.Operation(p.active.Labels[captfv1.OperationLabel]),
	}
	if p.active.Status.StartTime != nil {
		p.status.ActiveJob.StartTime = p.active.Status.StartTime
	}
	return watchPodless(ctx, r.engine, p) // a Job whose Pods admission refuses (podrefusal.go)
}

// setBlockMove sets or clears clusterctl.cluster.x-k8s.io/block-move with its own patch, at
// once: clusterctl move reads it before the deferred status patch would land. The patch goes
// through a copy, so the object the patch helper diffs keeps its resourceVersion and the
// annotation is not part of that diff; p.blockMove remembers what this pass wrote, since the
// object still shows what was read (a pass that clears it for a finished Job and then starts
// the next one must set it again).
func (r *provider[T]) setBlockMove(ctx context.Context, p *pass[T], block bool) error {
	obj := p.scope.Object
	_, has := obj.GetAnnotations()[clusterctlv1.BlockMoveAnnotation]
	if p.blockMove != nil {
		has = *p.blockMove
	}
	if has == block {
		return nil
	}
	marked := func(set bool) client.Object {
		o := obj.DeepCopyObject().(client.Object)
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		if set {
			a[clusterctlv1.BlockMoveAnnotation] = "true"
		} else {
			delete(a, clusterctlv1.BlockMoveAnnotation)
		}
		o.SetAnnotations(a)
		return o
	}
	if err := r.client.Patch(ctx, marked(block), client.MergeFrom(marked(has))); err != nil {
		return err
	}
	p.blockMove = &block
	return nil
}
