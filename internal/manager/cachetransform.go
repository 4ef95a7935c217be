package manager

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// stripManagedFields drops an object's managedFields before the manager's cache stores it: the
// manager never reads them (it writes with merge patches and updates, never server-side apply
// on a cached kind), and they are often the largest part of a small object's metadata.
func stripManagedFields(in any) (any, error) {
	if obj, err := meta.Accessor(in); err == nil && obj.GetManagedFields() != nil {
		obj.SetManagedFields(nil)
	}
	return in, nil
}

// trimJob is what the cache keeps of a CAPTF Job: no managedFields, and once the Job's result
// is recorded (captf.io/bookkept) no Pod template either. A recorded Job stays in the cache for
// as long as history pruning keeps it (per operation the newest success, at least: one drift
// Job per object once its first check ran), and its Pod template (containers, environment,
// volumes) is most of its size; the manager reads the template only of a Job it has not
// recorded yet (the module image an apply ran, the Pods of an active Job). Labels,
// annotations, the rest of the spec and the status stay: they are what the decisions read.
func trimJob(in any) (any, error) {
	if _, err := stripManagedFields(in); err != nil {
		return in, err
	}
	if job, ok := in.(*batchv1.Job); ok && job.Annotations[captfv1.BookkeptAnnotation] != "" {
		job.Spec.Template = corev1.PodTemplateSpec{}
	}
	return in, nil
}
