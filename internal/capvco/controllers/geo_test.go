package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// TestGeoTwoLocationsFlakyLinkDeletes: two sites in two locations, meshed; machines run in
// their site with that location's image; a site whose location has no image is a condition,
// not a crash; link deletes that fail 30% of the time are retried and tolerated, and teardown
// leaves nothing.
func TestGeoTwoLocationsFlakyLinkDeletes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{sim: vcosim.Options{LinkDeleteFailureRate: 0.3}})
	g := NewWithT(t)
	ctx := context.Background()
	beImage := h.imageID(vcosim.SeedLocation2)
	geo := func(images map[string]int64) func(*capvcov1.VCOCluster) {
		return func(vc *capvcov1.VCOCluster) {
			vc.Spec.Geo = &capvcov1.GeoSpec{
				Sites:          []capvcov1.GeoSite{{Name: "be", Location: vcosim.SeedLocation2}},
				LocationImages: images,
			}
		}
	}
	cluster, vc := h.cluster("geo", geo(map[string]int64{vcosim.SeedLocation2: beImage}))
	noImgCluster, noImg := h.cluster("noimg", geo(nil))

	waitFor(h, vc, time.Minute, "provisioned", provisionedCluster)
	g.Expect(vc.Status.Cloudspaces).To(HaveLen(2))
	g.Expect(vc.Status.Cloudspaces[1].Location).To(Equal(vcosim.SeedLocation2))
	g.Expect(conditions.IsTrue(vc, capvcov1.GeoMeshReadyCondition)).To(BeTrue())
	g.Expect(vc.Status.FailureDomains).To(HaveLen(2))

	waitFor(h, noImg, time.Minute, "LocationImagesReady=False", func(vc *capvcov1.VCOCluster) bool {
		c := conditions.Get(vc, capvcov1.LocationImagesReadyCondition)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == capvcov1.LocationImageMissingReason
	})
	g.Expect(conditions.Get(noImg, capvcov1.LocationImagesReadyCondition).Message).To(ContainSubstring(vcosim.SeedLocation2))

	cp := h.machine("geo", "cp-0", true, nil)
	be := h.machine("geo", "w-be", false, func(_ *capvcov1.VCOMachine, m *clusterv1.Machine) { m.Spec.FailureDomain = "be" })
	stuck := h.machine("noimg", "w-be-noimg", false, func(_ *capvcov1.VCOMachine, m *clusterv1.Machine) { m.Spec.FailureDomain = "be" })
	waitFor(h, cp, time.Minute, "provisioned", provisionedMachine)
	waitFor(h, be, time.Minute, "provisioned", provisionedMachine)
	g.Expect(be.Status.FailureDomain).To(Equal("be"))
	g.Expect(be.Spec.ProviderID).To(HavePrefix("vco://" + vcosim.SeedLocation2 + "/"))
	for _, v := range h.sim.Snapshot().VMs {
		if v.Name == "w-be" && v.CloudspaceID == vc.Status.Cloudspaces[1].ID {
			g.Expect(int64(v.ImageID)).To(Equal(beImage), "the site's VM runs the image of its location")
		}
	}
	waitFor(h, stuck, time.Minute, "VMReady=False LocationImageMissing", func(m *capvcov1.VCOMachine) bool {
		c := conditions.Get(m, capvcov1.VMReadyCondition)
		return c != nil && c.Reason == capvcov1.LocationImageMissingReason && c.Status == metav1.ConditionFalse
	})
	g.Expect(h.sim.Snapshot().Links).To(HaveLen(2), "one link per meshed cluster")

	g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, noImgCluster)).To(Succeed())
	h.waitGone(vc, 2*time.Minute)
	h.waitGone(noImg, 2*time.Minute)
	h.assertNothingLeft(nil)
	var failedLinkDeletes int
	for _, r := range h.sim.Requests() {
		if r.Method == "DELETE" && r.Status >= 400 && r.Route == "/api/1/customers/{customer_id}/cloudspaces/{cloudspace_id}/connected-cloudspaces/{connected_cloudspace_id}" {
			failedLinkDeletes++
		}
	}
	t.Logf("link deletes that failed and were retried or tolerated: %d", failedLinkDeletes)
}
