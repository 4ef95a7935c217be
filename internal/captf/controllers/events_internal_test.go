package controllers

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// TestJobEventCarriesNoOutput: the Event of a failed Job names the failure's kind and step but
// carries no stderr; the redacted summary stays in status.lastRun.
func TestJobEventCarriesNoOutput(t *testing.T) {
	g := NewWithT(t)
	rec := record.NewFakeRecorder(1)
	r := &provider[*captfv1.TerraformCluster]{engine: &engine{recorder: rec}}
	obj := &captfv1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	p := &pass[*captfv1.TerraformCluster]{scope: &reconcileScope[*captfv1.TerraformCluster]{Object: obj}}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "c-apply-1", Namespace: "ns"}}
	stderr := "Error: local-exec provisioner error: password=[redacted] host=10.1.2.3 user=admin"
	r.event(p, job, &captfv1.RunSummary{Job: job.Name, Operation: captfv1.OperationApply, Result: captfv1.RunFailed,
		Error: &captfv1.RunError{Kind: "step", Step: "apply", Summary: stderr}})
	ev := <-rec.Events
	g.Expect(ev).To(Equal("Warning JobFailed apply Job c-apply-1: Failed at step apply (step); the error is in status.lastRun.error"))
	g.Expect(ev).NotTo(ContainSubstring("10.1.2.3"))
	g.Expect(strings.Contains(ev, "Error:")).To(BeFalse())
}
