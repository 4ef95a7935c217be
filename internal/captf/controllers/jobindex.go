package controllers

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/jobs"
)

// activeJobIndex indexes the cached managed Jobs that still run. The caps count the running
// Jobs at every decision; without the index each count read, and deep-copied, every Job the
// cache holds, finished ones included (issue 27: O(Jobs) per reconcile at 500 machines). The
// index keeps one key per running Job, so a count reads the running Jobs only.
const activeJobIndex = "captf.io/active"

// activeJobKeys is activeJobIndex's key of a Job: "true" while a managed Job runs, none after.
func activeJobKeys(o client.Object) []string {
	j, ok := o.(*batchv1.Job)
	if !ok || j.Labels[captfv1.ManagedLabel] != "true" || jobs.Classify(j) != jobs.PhaseActive {
		return nil
	}
	return []string{"true"}
}

// indexActiveJobs registers activeJobIndex on the manager's Job informer.
func indexActiveJobs(ctx context.Context, mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &batchv1.Job{}, activeJobIndex, activeJobKeys)
}
