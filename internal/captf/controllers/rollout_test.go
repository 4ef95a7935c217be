package controllers_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/jobs"
)

// TestNewModuleVersionRollsOut (issue 25): spec.source.image is the module's version. Changing
// it starts an apply with the new image although the inputs are the same (the inputs hash covers
// only the variables), and the state records the image that applied it, so the rollout runs once.
func TestNewModuleVersionRollsOut(t *testing.T) {
	g := NewWithT(t)
	ns, _ := scenario(t)
	tc := newTerraformCluster(t, ns, "c1", nil)
	waitFor(t, tc, 2*time.Minute, "provisioned", func(o *captfv1.TerraformCluster) bool {
		return provisioned(o.Status.Initialization) && o.Status.ActiveJob == nil
	})
	g.Expect(readState(t, ns, captfv1.KindCluster, "c1").Image).To(Equal(clusterImage), "the state records the image that applied it")
	applies := countJobs(t, ns, captfv1.KindCluster, "c1", captfv1.OperationApply)

	const v2 = "capx.test/modules/cluster:v2"
	update(t, tc, func(o *captfv1.TerraformCluster) { o.Spec.Source.Image = v2 })
	imageOf := func(name string) string {
		for _, j := range jobsOf(t, ns, captfv1.KindCluster, "c1") {
			if j.Name == name {
				return jobs.SourceImage(&j)
			}
		}
		return ""
	}
	waitFor(t, tc, 2*time.Minute, "an apply of the new version recorded", func(o *captfv1.TerraformCluster) bool {
		last := o.Status.LastRun
		return o.Status.ActiveJob == nil && last != nil && last.Operation == captfv1.OperationApply &&
			last.Result == captfv1.RunSucceeded && imageOf(last.Job) == v2
	})
	g.Expect(countJobs(t, ns, captfv1.KindCluster, "c1", captfv1.OperationApply)).To(Equal(applies + 1))
	g.Expect(readState(t, ns, captfv1.KindCluster, "c1").Image).To(Equal(v2))
	n := countJobs(t, ns, captfv1.KindCluster, "c1", captfv1.OperationApply)
	never(t, 5*time.Second, "the rollout applied again", func() bool {
		return countJobs(t, ns, captfv1.KindCluster, "c1", captfv1.OperationApply) != n
	})

}
