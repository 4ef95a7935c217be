//go:build e2e

// This test runs the real external-dns against a real API server (envtest) and the
// capvco-external-dns-webhook provider on the whitesky.cloud simulator. It is one of the e2e
// packages (make e2e, which builds external-dns first with hack/external-dns.sh), because the
// external-dns binary takes minutes to build the first time:
//
//	hack/external-dns.sh            # builds bin/external-dns (v0.20.0, from the Go module proxy)
//	go test -tags e2e -v ./test/externaldns/
//
// EXTERNAL_DNS names another binary. Without one the test fails and names the command above.
package externaldns_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/capx-io/capx/internal/capvco/externaldns"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/internal/vco/vcotest"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, testenv.Options{}, &env)) }

const domain = "apps.example.com"

// binary is the external-dns to run.
func binary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("EXTERNAL_DNS")
	if bin == "" {
		bin = filepath.Join(env.Root, "bin", "external-dns")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no external-dns at %s (%v): run hack/external-dns.sh, or set EXTERNAL_DNS to a binary", bin, err)
	}
	return bin
}

// platform is the simulator's customer DNS records as "name type" lines.
func platform(t *testing.T, api *vco.Client) []string {
	t.Helper()
	recs, err := api.ListCustomerDNSRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, r.Domain+" "+r.Type)
	}
	slices.Sort(out)
	return out
}

// scenario is one test's world: a simulator with a cloudspace that has its public IP, the
// webhook provider serving it, and a namespace of its own on the API server.
type scenario struct {
	t       *testing.T
	bin     string
	sim     *vcosim.Server
	api     *vco.Client
	csID    string
	cs      vco.Cloudspace
	webhook string
	ns      string
}

// newScenario makes the world; name is both the cloudspace's and the namespace's.
func newScenario(t *testing.T, name string) *scenario {
	t.Helper()
	ctx := context.Background()
	sc := &scenario{t: t, bin: binary(t), ns: name}
	sc.sim = vcosim.NewTestServer(t, vcosim.Options{})
	sc.api = vcotest.Client(t, sc.sim, vcosim.SeedClusterPrinc)
	var err error
	if sc.csID, err = sc.api.CreateCloudspace(ctx, vco.CreateCloudspaceRequest{Name: name, Location: vcosim.SeedLocation}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); sc.cs.ExternalNetworkIP == ""; time.Sleep(10 * time.Millisecond) {
		if sc.cs, err = sc.api.GetCloudspace(ctx, sc.csID); err != nil || time.Now().After(deadline) {
			t.Fatalf("cloudspace %s has no public IP: %+v, %v", sc.csID, sc.cs, err)
		}
	}
	p := &externaldns.Provider{API: sc.api, Cloudspaces: []string{sc.csID}, Filter: externaldns.DomainFilter{Include: []string{domain}}, Log: testr.New(t)}
	webhook := httptest.NewServer(externaldns.Handler(p))
	t.Cleanup(webhook.Close)
	sc.webhook = webhook.URL
	if err := env.Client.Create(ctx, testenv.Namespace(name)); err != nil {
		t.Fatal(err)
	}
	return sc
}

// once runs external-dns --once (the TXT registry, policy sync, the domain filter) on the
// scenario's namespace through the webhook, with the sources, timeouts and owner id in args.
func (sc *scenario) once(wantOK bool, args ...string) {
	sc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args = append([]string{"--once", "--kubeconfig=" + env.KubeconfigPath, "--namespace=" + sc.ns,
		"--provider=webhook", "--webhook-provider-url=" + sc.webhook,
		"--registry=txt", "--policy=sync", "--domain-filter=" + domain, "--log-level=debug"}, args...)
	out, err := exec.CommandContext(ctx, sc.bin, args...).CombinedOutput()
	if (err == nil) != wantOK {
		sc.t.Fatalf("external-dns --once: %v (want success: %v)\n%s", err, wantOK, out)
	}
}

// TestRealExternalDNS: external-dns (--once, the TXT registry, policy sync) creates the A
// record and its ownership TXT records of an annotated LoadBalancer Service in the simulator,
// moves them when the hostname changes, converges after a platform fault in the middle of a
// change set, and removes them all when the Service is deleted.
func TestRealExternalDNS(t *testing.T) {
	ctx := context.Background()
	sc := newScenario(t, "edns")
	sim, api, csID, cs, ns := sc.sim, sc.api, sc.csID, sc.cs, sc.ns
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Annotations: map[string]string{"external-dns.alpha.kubernetes.io/hostname": "web." + domain}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if err := env.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	// What the cloud controller manager writes: the Service's address is the cloudspace's.
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: cs.ExternalNetworkIP}}
	if err := env.Client.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}

	run := func(wantOK bool) {
		t.Helper()
		sc.once(wantOK, "--source=service", "--webhook-provider-read-timeout=2m", "--webhook-provider-write-timeout=2m", "--txt-owner-id=capx-test")
	}
	has := func(name, typ string) bool { return slices.Contains(platform(t, api), name+" "+typ) }

	run(true)
	if !has("web."+domain, "A") || !slices.ContainsFunc(platform(t, api), func(r string) bool { return strings.HasSuffix(r, " TXT") }) {
		t.Fatalf("after the first sync the platform holds %v", platform(t, api))
	}
	recs, err := api.ListCloudspaceDNSRecords(ctx, csID)
	if err != nil || !slices.ContainsFunc(recs, func(r vco.DNSRecord) bool { return r.Domain == "web."+domain && r.Type == "A" }) {
		t.Fatalf("the A record is not on the cloudspace: %+v, %v", recs, err)
	}

	// The hostname changes; the platform fails the change set's first write (creating the new
	// name's ownership TXT record, on the customer, which goes before everything else).
	svc.Annotations["external-dns.alpha.kubernetes.io/hostname"] = "shop." + domain
	if err := env.Client.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	sim.Faults().Script("POST /alpha/customers/{customer_id}/dns-records", vcosim.Fault{Status: http.StatusInternalServerError})
	run(false)
	if !has("web."+domain, "A") {
		t.Fatalf("the old record went while the change set failed: %v", platform(t, api))
	}
	run(true)
	if !has("shop."+domain, "A") || has("web."+domain, "A") {
		t.Fatalf("after the rename the platform holds %v", platform(t, api))
	}

	if err := env.Client.Delete(ctx, svc); err != nil {
		t.Fatal(err)
	}
	run(true)
	if got := platform(t, api); len(got) != 0 {
		t.Fatalf("after the Service's deletion the platform still holds %v", got)
	}
}

// TestRealExternalDNSIngress: the Ingress source, as the delivered add-on runs it (both sources,
// the TXT registry, an owner id of the cluster's): an Ingress's host gets its A record on the
// cloudspace whose public IP its status names, and loses it when the Ingress is deleted.
func TestRealExternalDNSIngress(t *testing.T) {
	ctx := context.Background()
	sc := newScenario(t, "edns-ingress")
	api, csID, cs, ns := sc.api, sc.csID, sc.cs, sc.ns
	prefix := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "shop." + domain, IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "shop", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}},
	}
	if err := env.Client.Create(ctx, ing); err != nil {
		t.Fatal(err)
	}
	// What an ingress controller behind the CCM's load balancer writes: the cloudspace's address.
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: cs.ExternalNetworkIP}}
	if err := env.Client.Status().Update(ctx, ing); err != nil {
		t.Fatal(err)
	}
	run := func() {
		t.Helper()
		sc.once(true, "--source=service", "--source=ingress", "--webhook-provider-read-timeout=10m", "--webhook-provider-write-timeout=10m", "--txt-owner-id=capvco-"+ns+"-prod")
	}
	run()
	recs, err := api.ListCloudspaceDNSRecords(ctx, csID)
	if err != nil || !slices.ContainsFunc(recs, func(r vco.DNSRecord) bool { return r.Domain == "shop."+domain && r.Type == "A" }) {
		t.Fatalf("the Ingress's A record is not on the cloudspace: %+v, %v (customer records %v)", recs, err, platform(t, api))
	}
	if !slices.ContainsFunc(platform(t, api), func(r string) bool { return strings.HasSuffix(r, " TXT") }) {
		t.Fatalf("no ownership TXT record: %v", platform(t, api))
	}
	if err := env.Client.Delete(ctx, ing); err != nil {
		t.Fatal(err)
	}
	run()
	if got := platform(t, api); len(got) != 0 {
		t.Fatalf("after the Ingress's deletion the platform still holds %v", got)
	}
}
