package controllers

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/cloudspace"
	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/capvco/dns"
	"github.com/capx-io/capx/internal/capvco/geo"
	"github.com/capx-io/capx/internal/capvco/platform"
	"github.com/capx-io/capx/internal/vco"
)

func deployedSite(name string) siteObserved {
	return siteObserved{site: decide.Site{Name: name, Location: "l"},
		Observed: cloudspace.Observed{Cloudspace: vco.Cloudspace{ID: "cs-" + name, Name: "capvco_ns_c_" + name, Status: "DEPLOYED", ExternalNetworkIP: "203.0.113.5"}}}
}

// TestSetClusterStatus: Ready and provisioned only when everything observed exists; every
// missing piece is a condition that says what and why.
func TestSetClusterStatus(t *testing.T) {
	lb := &capvcov1.LoadBalancerStatus{ID: "lb", ServerPoolID: "p", Address: "203.0.113.5"}
	full := func() *clusterObserved {
		return &clusterObserved{sites: []siteObserved{deployedSite("primary")}, sitesDone: true, lbDone: true}
	}
	for _, tc := range []struct {
		name     string
		spec     func(*capvcov1.VCOCluster)
		obs      func() *clusterObserved
		ready    bool
		cond     string
		reason   string
		contains string
	}{
		{name: "everything there", obs: full, ready: true, cond: capvcov1.LoadBalancerReadyCondition, reason: capvcov1.ProvisionedReason, contains: "server pool is empty"},
		{name: "credentials missing", obs: func() *clusterObserved {
			return &clusterObserved{credentials: fmt.Errorf("Secret ns/x: %w", platform.ErrCredentialsNotFound)}
		}, cond: capvcov1.CredentialsReadyCondition, reason: capvcov1.CredentialsNotFoundReason, contains: "clientSecret"},
		{name: "cloudspace deploying", obs: func() *clusterObserved {
			o := full()
			o.sites[0].Cloudspace.Status, o.lbDone, o.sitesDone = "DEPLOYING", false, false
			return o
		}, cond: capvcov1.CloudspaceReadyCondition, reason: capvcov1.ProvisioningReason, contains: "is DEPLOYING"},
		{name: "cloudspace lost", obs: func() *clusterObserved {
			o := full()
			o.sites[0].Lost, o.lbDone = true, false
			return o
		}, cond: capvcov1.CloudspaceReadyCondition, reason: capvcov1.NotFoundReason, contains: "not recreated"},
		{name: "LB failed", obs: func() *clusterObserved {
			o := full()
			o.lbDone, o.lbErr = false, errors.New("409 port taken")
			return o
		}, cond: capvcov1.LoadBalancerReadyCondition, reason: capvcov1.ProvisioningFailedReason, contains: "port taken"},
		{name: "DNS writing", spec: func(vc *capvcov1.VCOCluster) { vc.Spec.DNS = &capvcov1.DNSSpec{Name: "api.example.com"} }, obs: func() *clusterObserved {
			o := full()
			o.dnsProgress = &dns.Progress{Since: time.Now().Add(-10 * time.Second)}
			return o
		}, cond: capvcov1.DNSReadyCondition, reason: capvcov1.ProvisioningReason, contains: "about 30 s"},
		{name: "DNS published", spec: func(vc *capvcov1.VCOCluster) { vc.Spec.DNS = &capvcov1.DNSSpec{Name: "api.example.com"} }, obs: func() *clusterObserved {
			o := full()
			o.dnsProgress = &dns.Progress{Done: true}
			return o
		}, ready: true, cond: capvcov1.DNSReadyCondition, reason: capvcov1.ProvisionedReason, contains: "3600"},
		{name: "geo connecting", spec: func(vc *capvcov1.VCOCluster) {
			vc.Spec.Geo = &capvcov1.GeoSpec{Sites: []capvcov1.GeoSite{{Name: "b", Location: "l"}}}
		}, obs: func() *clusterObserved {
			o := full()
			o.sites = append(o.sites, deployedSite("b"))
			o.mesh = &geo.Mesh{Links: 1, Connecting: []string{"primary<->b"}}
			return o
		}, cond: capvcov1.GeoMeshReadyCondition, reason: capvcov1.ConnectingReason, contains: "primary<->b"},
		{name: "geo image missing does not block Ready", spec: func(vc *capvcov1.VCOCluster) {
			vc.Spec.Geo = &capvcov1.GeoSpec{Sites: []capvcov1.GeoSite{{Name: "b", Location: "l2"}}}
		}, obs: func() *clusterObserved {
			o := full()
			o.sites = append(o.sites, deployedSite("b"))
			o.mesh = &geo.Mesh{Links: 1}
			o.missingImages = []string{"l2"}
			return o
		}, ready: true, cond: capvcov1.LocationImagesReadyCondition, reason: capvcov1.LocationImageMissingReason, contains: "l2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vc := &capvcov1.VCOCluster{}
			vc.Spec.Location = "l"
			if tc.spec != nil {
				tc.spec(vc)
			}
			vc.Status.LoadBalancer = lb.DeepCopy()
			conditions.Set(vc, metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotPausedReason})
			conditions.Set(vc, metav1.Condition{Type: clusterv1.DeletingCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotDeletingReason})
			setEndpoint(vc, "203.0.113.5", 6443)
			setClusterStatus(vc, tc.obs())
			if got := conditions.IsTrue(vc, capvcov1.ReadyCondition); got != tc.ready {
				t.Fatalf("Ready = %v, want %v:\n%v", got, tc.ready, vc.Status.Conditions)
			}
			if got := ptr.Deref(vc.Status.Initialization.Provisioned, false); got != tc.ready {
				t.Fatalf("provisioned = %v, want %v", got, tc.ready)
			}
			c := conditions.Get(vc, tc.cond)
			if c == nil || c.Reason != tc.reason || !strings.Contains(c.Message, tc.contains) {
				t.Fatalf("%s = %+v, want reason %s containing %q", tc.cond, c, tc.reason, tc.contains)
			}
		})
	}
}

// TestTeardownMessages: each step of a VCOCluster's teardown names itself in Deleting.
func TestTeardownMessages(t *testing.T) {
	for step := stepMachines; step < stepDone; step++ {
		vc := &capvcov1.VCOCluster{}
		setClusterStatus(vc, &clusterObserved{teardownActive: true, teardown: teardownProgress{step: step, err: errors.New("boom")}})
		c := conditions.Get(vc, clusterv1.DeletingCondition)
		want := fmt.Sprintf("step %d/8: %s", int(step)+1, stepNames[step])
		if c == nil || c.Status != metav1.ConditionTrue || !strings.HasPrefix(c.Message, want) || !strings.HasSuffix(c.Message, ": boom") {
			t.Errorf("step %d: Deleting = %+v, want %q...: boom", step, c, want)
		}
	}
	msg := teardownProgress{step: stepLinks, tolerated: []string{"primary<->b"}}.message()
	if !strings.Contains(msg, "tolerated") || !strings.Contains(msg, "primary<->b") {
		t.Errorf("tolerated links not named: %s", msg)
	}
	msg = teardownProgress{step: stepLinks, left: "the certificate for registry.example is left in the store"}.message()
	if !strings.Contains(msg, "; the certificate for registry.example is left in the store") {
		t.Errorf("what teardown left is not said: %s", msg)
	}
}

// TestSetMachineStatus: provisioned only with a running VM and every vGPU attached; a lost VM
// keeps provisioned (it never goes back) but is not Ready.
func TestSetMachineStatus(t *testing.T) {
	running := &vco.VM{ID: 7, Name: "m", Status: "RUNNING", NICs: []vco.NIC{{IP: "192.168.103.10"}}}
	for _, tc := range []struct {
		name   string
		obs    *machineObserved
		ready  bool
		prov   bool
		reason string
	}{
		{"waiting for cluster", &machineObserved{waitReason: capvcov1.WaitingForClusterReason, waitMessage: "x"}, false, false, capvcov1.WaitingForClusterReason},
		{"image missing", &machineObserved{waitReason: capvcov1.LocationImageMissingReason, waitMessage: "x"}, false, false, capvcov1.LocationImageMissingReason},
		{"running", &machineObserved{vm: running}, true, true, capvcov1.ProvisionedReason},
		{"halted", &machineObserved{vm: &vco.VM{ID: 7, Status: "HALTED"}}, false, false, capvcov1.ProvisioningReason},
		{"gpu missing", &machineObserved{vm: running, gpuWanted: 1}, false, false, capvcov1.ProvisionedReason},
		{"gpu attached", &machineObserved{vm: running, gpuWanted: 1, gpus: []capvcov1.GPUStatus{{Name: "g", Attached: true}}}, true, true, capvcov1.ProvisionedReason},
		{"lost", &machineObserved{lost: true, vmErr: errors.New("VM 7 gone")}, false, false, capvcov1.NotFoundReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &capvcov1.VCOMachine{}
			conditions.Set(m, metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotPausedReason})
			setMachineStatus(m, tc.obs)
			if got := conditions.IsTrue(m, capvcov1.ReadyCondition); got != tc.ready {
				t.Fatalf("Ready = %v, want %v: %v", got, tc.ready, m.Status.Conditions)
			}
			if got := ptr.Deref(m.Status.Initialization.Provisioned, false); got != tc.prov {
				t.Fatalf("provisioned = %v, want %v", got, tc.prov)
			}
			if c := conditions.Get(m, capvcov1.VMReadyCondition); c == nil || c.Reason != tc.reason {
				t.Fatalf("VMReady = %+v, want %s", c, tc.reason)
			}
		})
	}
}
