package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

const (
	routeCreateCloudspace = "POST /customers/{customer_id}/cloudspaces"
	routeCreateVM         = "POST /customers/{customer_id}/cloudspaces/{cloudspace_id}/vms"
	routeReserveAttach    = "POST /customers/{customer_id}/cloudspaces/{cloudspace_id}/vms/{vm_id}/gpus/{gpu_id}"
	routeCreateLB         = "POST /customers/{customer_id}/cloudspaces/{cloudspace_id}/ingress/load-balancers"
	routeCreatePool       = "POST /customers/{customer_id}/cloudspaces/{cloudspace_id}/ingress/server-pools"
	routeAddHost          = "POST /customers/{customer_id}/cloudspaces/{cloudspace_id}/ingress/server-pools/{serverpool_id}/hosts"
	routeDeleteVM         = "DELETE /customers/{customer_id}/cloudspaces/{cloudspace_id}/vms/{vm_id}"
	routeDeleteCloudspace = "DELETE /customers/{customer_id}/cloudspaces/{cloudspace_id}"
	routeReleaseVGPU      = "DELETE /customers/{customer_id}/locations/{location}/vgpus/{vgpu_id}"
	routeDeleteLB         = "DELETE /customers/{customer_id}/cloudspaces/{cloudspace_id}/ingress/load-balancers/{loadbalancer_id}"
)

// faultClass is one kind of misbehaviour the simulator injects, installed before creating
// and again before deleting.
type faultClass struct {
	name string
	// install sets the faults for a phase ("create" or "delete").
	install func(s *vcosim.Server, phase string)
	// created, when set, runs once the objects exist during the create phase: it checks the
	// fault was seen and lifts it.
	created func(h *harness, vc *capvcov1.VCOCluster)
}

// bounded faults fire often but a limited number of times, so convergence is bounded too.
func bounded(f vcosim.Fault) func(*vcosim.Server, string) {
	return func(s *vcosim.Server, _ string) {
		s.Faults().Reset()
		f.Route, f.Rate, f.Count = "*", 0.5, 8
		s.Faults().Add(f)
	}
}

// afterApply makes every create (or delete) time out once after the platform carried it out:
// the unknown outcome the controllers must resolve by name, never by doing it twice.
func afterApply(s *vcosim.Server, phase string) {
	s.Faults().Reset()
	routes := []string{routeCreateCloudspace, routeCreateVM, routeReserveAttach, routeCreateLB, routeCreatePool, routeAddHost}
	if phase == "delete" {
		routes = []string{routeDeleteVM, routeDeleteCloudspace, routeReleaseVGPU, routeDeleteLB}
	}
	for _, r := range routes {
		s.Faults().Script(r, vcosim.Fault{Timeout: true, Hang: 20 * time.Millisecond, Apply: true})
	}
}

// TestFaultClassesConverge: under every fault class the simulator injects, during create and
// during delete, the cluster converges with exactly one of everything and tears down leaving
// nothing.
func TestFaultClassesConverge(t *testing.T) {
	classes := []faultClass{
		{name: "403", install: bounded(vcosim.Fault{Status: 403})},
		{name: "429-retry-after", install: bounded(vcosim.Fault{Status: 429, RetryAfter: 10 * time.Millisecond})},
		{name: "500", install: bounded(vcosim.Fault{Status: 500})},
		{name: "timeout", install: bounded(vcosim.Fault{Timeout: true, Hang: 20 * time.Millisecond})},
		{name: "timeout-after-apply", install: afterApply},
		{name: "location-down", install: func(s *vcosim.Server, phase string) {
			s.Faults().Reset()
			s.Faults().LocationDown(vcosim.SeedLocation, phase == "create")
		}, created: func(h *harness, vc *capvcov1.VCOCluster) {
			// A list in which the location did not answer is never read as "absent".
			waitFor(h, vc, 30*time.Second, "CloudspaceReady=False while the location is down", func(vc *capvcov1.VCOCluster) bool {
				c := conditions.Get(vc, capvcov1.CloudspaceReadyCondition)
				return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, vcosim.SeedLocation)
			})
			NewWithT(h.t).Expect(h.sim.Snapshot().Cloudspaces).To(BeEmpty())
			h.sim.Faults().LocationDown(vcosim.SeedLocation, false)
		}},
	}
	for _, fc := range classes {
		t.Run(fc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOptions{})
			g := NewWithT(t)
			fc.install(h.sim, "create")
			cluster, vc := h.cluster("f", nil)
			cp := h.machine("f", "cp-0", true, nil)
			w := h.machine("f", "gpu-0", false, func(m *capvcov1.VCOMachine, _ *clusterv1.Machine) {
				m.Spec.GPU = &capvcov1.GPUSpec{Vendor: "nvidia"}
			})
			if fc.created != nil {
				fc.created(h, vc)
			}
			waitFor(h, vc, 90*time.Second, "provisioned", provisionedCluster)
			waitFor(h, cp, 90*time.Second, "provisioned", provisionedMachine)
			waitFor(h, w, 90*time.Second, "provisioned", provisionedMachine)
			waitFor(h, vc, 30*time.Second, "a member", func(vc *capvcov1.VCOCluster) bool {
				return vc.Status.LoadBalancer != nil && len(vc.Status.LoadBalancer.Members) == 1
			})

			snap := h.sim.Snapshot()
			count := func(n int, what string) { g.Expect(n).To(Equal(1), "exactly one %s (no duplicate)", what) }
			count(len(snap.Cloudspaces), "cloudspace")
			count(len(snap.LoadBalancers), "load balancer")
			count(len(snap.ServerPools), "server pool")
			count(len(snap.VGPUs), "vGPU")
			g.Expect(snap.VMs).To(HaveLen(2), "exactly two VMs")
			g.Expect(snap.ServerPools[0].Hosts).To(HaveLen(1), "one pool host")

			fc.install(h.sim, "delete")
			g.Expect(env.Client.Delete(context.Background(), cluster)).To(Succeed())
			h.waitGone(vc, 2*time.Minute)
			h.sim.Faults().Reset()
			h.assertNothingLeft(nil)
			t.Logf("%s: %s", fc.name, requestSummary(h.sim.Requests()))
		})
	}
}

func requestSummary(reqs []vcosim.RequestRecord) string {
	codes := map[int]int{}
	for _, r := range reqs {
		codes[r.Status]++
	}
	return fmt.Sprintf("%d requests, by status %v", len(reqs), codes)
}
