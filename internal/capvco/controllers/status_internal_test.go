package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/cloudspace"
	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/capvco/dns"
	"github.com/capx-io/capx/internal/capvco/geo"
	"github.com/capx-io/capx/internal/capvco/imagepublish"
	"github.com/capx-io/capx/internal/capvco/platform"
	"github.com/capx-io/capx/internal/capvco/registrycert"
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
		{name: "geo image published", spec: geoWithImage(""), obs: withImages(imagepublish.Outcome{Location: "l2", ID: 7, Visible: true, Published: true}),
			ready: true, cond: capvcov1.LocationImagesReadyCondition, reason: capvcov1.ProvisionedReason, contains: "l2=7"},
		{name: "geo image not visible, no publish credential", spec: geoWithImage(""), obs: withImages(imagepublish.Outcome{Location: "l2", ID: 7, Err: imagepublish.ErrNotVisible}),
			ready: true, cond: capvcov1.LocationImagesReadyCondition, reason: capvcov1.LocationImageNotVisibleReason, contains: "set spec.geo.imagePublishCredentialSecretRef"},
		{name: "geo image publish refused", spec: geoWithImage("op"), obs: withImages(imagepublish.Outcome{Location: "l2", ID: 7, Err: fmt.Errorf("PUT: %w", vco.ErrForbidden)}),
			ready: true, cond: capvcov1.LocationImagesReadyCondition, reason: capvcov1.OperatorCredentialForbiddenReason, contains: "Secret op (spec.geo.imagePublishCredentialSecretRef) was refused (403)"},
		{name: "geo image does not exist", spec: geoWithImage("op"), obs: withImages(imagepublish.Outcome{Location: "l2", ID: 7, Err: imagepublish.ErrNoSuchImage}),
			ready: true, cond: capvcov1.LocationImagesReadyCondition, reason: capvcov1.LocationImageNotVisibleReason, contains: "image 7 does not exist in l2"},
		{name: "registry certificate stored", spec: withRegistry(true, true), obs: withRegistryObs(&registryObserved{cert: testCert, credential: "op", action: registrycert.Uploaded}),
			ready: true, cond: capvcov1.RegistryCertificateReadyCondition, reason: capvcov1.ProvisionedReason, contains: "certificate for registry.example (sha256 0123456789abcdef"},
		{name: "registry certificate refused for the cluster's credential", spec: withRegistry(true, false),
			obs:   withRegistryObs(&registryObserved{cert: testCert, credential: "vco-credentials", clusterCredential: true, err: fmt.Errorf("upload: %w", vco.ErrForbidden)}),
			ready: true, cond: capvcov1.RegistryCertificateReadyCondition, reason: capvcov1.OperatorCredentialForbiddenReason, contains: "the cluster's credential (Secret vco-credentials) for the certificate for registry.example"},
		{name: "registry certificate Secret invalid", spec: withRegistry(true, true), obs: withRegistryObs(&registryObserved{credential: "op", err: fmt.Errorf("Secret ns/tls: %w: bad", registrycert.ErrInvalid)}),
			ready: true, cond: capvcov1.RegistryCertificateReadyCondition, reason: capvcov1.CertificateInvalidReason, contains: "Secret ns/tls"},
		{name: "registry operator credential missing", spec: withRegistry(true, true), obs: withRegistryObs(&registryObserved{credential: "op", err: fmt.Errorf("Secret ns/op: %w", platform.ErrCredentialsNotFound)}),
			ready: true, cond: capvcov1.RegistryCertificateReadyCondition, reason: capvcov1.CredentialsNotFoundReason, contains: "spec.registry.certCredentialSecretRef"},
		{name: "registry credential without a certificate", spec: withRegistry(false, true), obs: full,
			ready: true, cond: capvcov1.RegistryCertificateReadyCondition, reason: capvcov1.CertificateInvalidReason, contains: "certificateSecretRef is not"},
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

var testCert = &registrycert.Certificate{Domain: "registry.example", Fingerprint: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", NotAfter: time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC)}

func geoWithImage(publish string) func(*capvcov1.VCOCluster) {
	return func(vc *capvcov1.VCOCluster) {
		vc.Spec.Geo = &capvcov1.GeoSpec{Sites: []capvcov1.GeoSite{{Name: "b", Location: "l2"}}, LocationImages: map[string]int64{"l2": 7}}
		if publish != "" {
			vc.Spec.Geo.ImagePublishCredentialSecretRef = &corev1.LocalObjectReference{Name: publish}
		}
	}
}

func withImages(o imagepublish.Outcome) func() *clusterObserved {
	return func() *clusterObserved {
		obs := &clusterObserved{sites: []siteObserved{deployedSite("primary"), deployedSite("b")}, sitesDone: true, lbDone: true, mesh: &geo.Mesh{Links: 1}}
		obs.images = &imagesObserved{outcomes: []imagepublish.Outcome{o}}
		if errors.Is(o.Err, vco.ErrForbidden) || errors.Is(o.Err, imagepublish.ErrNoSuchImage) {
			obs.images.credential = "op"
		}
		return obs
	}
}

func withRegistry(cert, cred bool) func(*capvcov1.VCOCluster) {
	return func(vc *capvcov1.VCOCluster) {
		vc.Spec.Registry = &capvcov1.RegistrySpec{}
		if cert {
			vc.Spec.Registry.CertificateSecretRef = &corev1.LocalObjectReference{Name: "tls"}
		}
		if cred {
			vc.Spec.Registry.CertCredentialSecretRef = &corev1.LocalObjectReference{Name: "op"}
		}
	}
}

func withRegistryObs(r *registryObserved) func() *clusterObserved {
	return func() *clusterObserved {
		return &clusterObserved{sites: []siteObserved{deployedSite("primary")}, sitesDone: true, lbDone: true, registry: r}
	}
}

// TestTeardownMessages: each step of a VCOCluster's teardown names itself in Deleting.
func TestTeardownMessages(t *testing.T) {
	if len(teardownSteps) != 8 {
		t.Fatalf("%d teardown steps", len(teardownSteps))
	}
	stepLinks := slices.IndexFunc(teardownSteps, func(s teardownStep) bool { return s.name == "deleting the connected-cloudspace links" })
	for step := range teardownSteps {
		vc := &capvcov1.VCOCluster{}
		setClusterStatus(vc, &clusterObserved{teardownActive: true, teardown: teardownProgress{step: step, err: errors.New("boom")}})
		c := conditions.Get(vc, clusterv1.DeletingCondition)
		want := fmt.Sprintf("step %d/8: %s", step+1, teardownSteps[step].name)
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

// TestRecalledPassWritesNothing: a pass that takes the cloudspaces, load balancer and pool from
// status (no read due) computes the very status the read before it wrote, so it patches
// nothing; the read stamps platformCheckedAt, and the recall keeps the stamp.
func TestRecalledPassWritesNothing(t *testing.T) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	vc := &capvcov1.VCOCluster{}
	vc.Spec.Location, vc.Generation = "l", 2
	conditions.Set(vc, metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotPausedReason})
	conditions.Set(vc, metav1.Condition{Type: clusterv1.DeletingCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotDeletingReason})
	read := &clusterObserved{now: now, sites: []siteObserved{deployedSite("primary")}, sitesDone: true, lbDone: true, platformRead: true,
		lb:      &vco.LoadBalancer{ID: "lb", FrontEnd: vco.LBFrontEnd{Port: 6443, IPAddress: "203.0.113.5"}},
		pool:    &vco.ServerPool{ID: "p", Hosts: []vco.PoolHost{{ID: "h1", Address: "10.0.0.2"}}},
		members: []string{"10.0.0.2"}}
	setClusterStatus(vc, read)
	vc.Status.ObservedGeneration = vc.Generation // the patch helper's part
	if vc.Status.PlatformCheckedAt == nil || !vc.Status.PlatformCheckedAt.Time.Equal(now) {
		t.Fatalf("platformCheckedAt = %v after a read at %v", vc.Status.PlatformCheckedAt, now)
	}
	r := &clusterProvider{resync: 10 * time.Minute}
	later := vc.DeepCopy()
	p := &clusterPass{vc: later, obs: &clusterObserved{now: now.Add(time.Minute)}}
	if err := r.recallPlatform(context.Background(), p); err != nil || !p.obs.recalled {
		t.Fatalf("recallPlatform: recalled=%v, %v; want the record used", p.obs.recalled, err)
	}
	if p.requeue != 9*time.Minute {
		t.Errorf("requeue %s; want the read's resync left (9m)", p.requeue)
	}
	p.obs.sitesDone, p.obs.members = true, hostAddresses(p.obs.pool.Hosts) // awaitCloudspaces, syncMembers
	setClusterStatus(later, p.obs)
	if !equality.Semantic.DeepEqual(vc.Status, later.Status) {
		t.Fatalf("a recalled pass changed status:\nread     %+v\nrecalled %+v", vc.Status, later.Status)
	}
	if due, _ := decide.PlatformReadDue(later, r.resync, now.Add(r.resync)); !due {
		t.Fatal("no read due a resync after the last read")
	}
}
