package jobs

import batchv1 "k8s.io/api/batch/v1"

// SourceImage is the module image a Job runs (its source container's image), "" when it has
// none.
func SourceImage(job *batchv1.Job) string {
	for _, c := range job.Spec.Template.Spec.Containers {
		if c.Name == SourceContainer {
			return c.Image
		}
	}
	return ""
}
