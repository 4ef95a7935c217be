package manager

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// TestTrimJob: the cache keeps a recorded Job's labels, annotations, spec outside the Pod
// template and status, and drops its Pod template; a Job not recorded yet keeps its template
// (the manager still reads its module image and its Pods' admission). Neither keeps
// managedFields.
func TestTrimJob(t *testing.T) {
	job := func(bookkept string) *batchv1.Job {
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{
				Name: "tm-drift-1", Labels: map[string]string{captfv1.OperationLabel: "drift"},
				Annotations:   map[string]string{},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "manager", Operation: metav1.ManagedFieldsOperationUpdate}},
			},
			Spec: batchv1.JobSpec{
				ActiveDeadlineSeconds: ptr.To[int64](600),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "runner", Image: "runner:1"}, {Name: "source", Image: "module:1"}},
				}},
			},
			Status: batchv1.JobStatus{Succeeded: 1},
		}
		if bookkept != "" {
			j.Annotations[captfv1.BookkeptAnnotation] = bookkept
		}
		return j
	}
	for _, tc := range []struct {
		name         string
		bookkept     string
		wantTemplate bool
	}{
		{"running or not recorded yet", "", true},
		{"recorded success", string(captfv1.RunSucceeded), false},
		{"recorded failure", string(captfv1.RunFailed), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := trimJob(job(tc.bookkept))
			if err != nil {
				t.Fatal(err)
			}
			j := out.(*batchv1.Job)
			if j.ManagedFields != nil {
				t.Errorf("managedFields kept: %v", j.ManagedFields)
			}
			if got := len(j.Spec.Template.Spec.Containers) > 0; got != tc.wantTemplate {
				t.Errorf("Pod template kept: %v, want %v", got, tc.wantTemplate)
			}
			if j.Labels[captfv1.OperationLabel] != "drift" || j.Annotations[captfv1.BookkeptAnnotation] != tc.bookkept ||
				ptr.Deref(j.Spec.ActiveDeadlineSeconds, 0) != 600 || j.Status.Succeeded != 1 {
				t.Errorf("the transform dropped what decisions read: %+v", j)
			}
		})
	}
}

// TestStripManagedFields: every cached object loses its managedFields and nothing else; what is
// not an object passes unchanged.
func TestStripManagedFields(t *testing.T) {
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "state", Labels: map[string]string{"tfstateSecretSuffix": "x"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "tofu"}},
	}}
	out, err := stripManagedFields(obj)
	if err != nil {
		t.Fatal(err)
	}
	if m := out.(*metav1.PartialObjectMetadata); m.ManagedFields != nil || m.Labels["tfstateSecretSuffix"] != "x" || m.Name != "state" {
		t.Errorf("got %+v", m.ObjectMeta)
	}
	if out, err := stripManagedFields("not an object"); err != nil || out != "not an object" {
		t.Errorf("a non-object: %v, %v", out, err)
	}
}
