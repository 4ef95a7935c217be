package controllers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/testenv/mgrtest"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// endpointCluster creates a Cluster and its VCOCluster naming the credential Secret secret,
// which it creates with data.
func endpointCluster(t *testing.T, ns, name, secret string, data map[string]string) *capvcov1.VCOCluster {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret}, StringData: data})).To(Succeed())
	c := testenv.Cluster(ns, name, "VCOCluster", name)
	c.Spec.ClusterNetwork.Services.CIDRBlocks = []string{"10.96.0.0/12"}
	vc := testenv.VCOCluster(ns, name, name, vcosim.SeedLocation, secret)
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Expect(env.Client.Create(ctx, vc)).To(Succeed())
	return vc
}

func credentialsInvalid(contains ...string) func(*capvcov1.VCOCluster) bool {
	return func(vc *capvcov1.VCOCluster) bool {
		c := conditions.Get(vc, capvcov1.CredentialsReadyCondition)
		if c == nil || c.Reason != capvcov1.CredentialsInvalidReason {
			return false
		}
		for _, s := range contains {
			if !strings.Contains(c.Message, s) {
				return false
			}
		}
		return true
	}
}

// TestManagerRefusesPlainHTTPFromSecrets: the real manager, started without --vco-allow-http,
// refuses a credential Secret that still says allowHTTP (naming the key and the flag), and a
// plain-http URL on a host other than loopback, before any request. (Today's HEAD, 4d97e0c,
// accepted the first and named the Secret key for the second.)
func TestManagerRefusesPlainHTTPFromSecrets(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	sim := vcosim.NewTestServer(t, vcosim.Options{})
	tok, err := sim.Token(vcosim.SeedClusterPrinc, 0)
	if err != nil {
		t.Fatal(err)
	}
	mgrtest.Start(t, env, "--providers=capvco", "--namespace="+ns)
	withKey := endpointCluster(t, ns, "with-key", "with-key", map[string]string{vco.SecretKeyURL: sim.APIURL(),
		vco.SecretKeyCustomer: vcosim.SeedCustomer, vco.SecretKeyJWT: tok, vco.SecretKeyAllowHTTP: "true"})
	plain := endpointCluster(t, ns, "plain", "plain", map[string]string{vco.SecretKeyURL: "http://203.0.113.7:9/api/1",
		vco.SecretKeyCustomer: vcosim.SeedCustomer, vco.SecretKeyJWT: tok})

	mgrtest.WaitFor(t, env, withKey, time.Minute, "CredentialsInvalid naming the key and --vco-allow-http",
		credentialsInvalid(`"allowHTTP" is no longer honoured`, "--vco-allow-http", "Secret "+ns+"/with-key"))
	mgrtest.WaitFor(t, env, plain, time.Minute, "CredentialsInvalid naming --vco-allow-http",
		credentialsInvalid(`"url" is http://203.0.113.7:9`, "--vco-allow-http"))
	if reqs := sim.Requests(); len(reqs) != 0 {
		t.Fatalf("a refused credential reached the API: %+v", reqs)
	}
	shown, _ := json.Marshal([]any{withKey.Status, plain.Status})
	NewWithT(t).Expect(string(shown)).NotTo(ContainSubstring(tok), "the token was shown")
}

// TestManagerAllowedHosts: with --vco-allowed-hosts, a credential naming another host is
// refused with a condition naming the host and the flag, and the host gets no request at all.
// (Today's HEAD, 4d97e0c, has no such flag.)
func TestManagerAllowedHosts(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	sim := vcosim.NewTestServer(t, vcosim.Options{})
	tok, err := sim.Token(vcosim.SeedClusterPrinc, 0)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(sim.APIURL())
	mgrtest.Start(t, env, "--providers=capvco", "--namespace="+ns, "--vco-allowed-hosts=try.whitesky.cloud,iam.example.com:443")
	vc := endpointCluster(t, ns, "elsewhere", "elsewhere", map[string]string{vco.SecretKeyURL: sim.APIURL(),
		vco.SecretKeyCustomer: vcosim.SeedCustomer, vco.SecretKeyJWT: tok, vco.SecretKeyIAMURL: sim.IAMURL()})
	mgrtest.WaitFor(t, env, vc, time.Minute, "CredentialsInvalid naming the host and --vco-allowed-hosts",
		credentialsInvalid(`"url" names host `+u.Host, `"iamURL" names host `+u.Host, "--vco-allowed-hosts=try.whitesky.cloud,iam.example.com:443"))
	if reqs := sim.Requests(); len(reqs) != 0 {
		t.Fatalf("a host outside the allow-list got %d requests: %+v", len(reqs), reqs)
	}
}

// TestErrorPagesNeverShown: an API URL that answers an HTML page (a proxy's, or any service a
// credential points at) shows only the status in the VCOCluster's conditions, its events and
// the controllers' log, never the page. (Today's HEAD, 4d97e0c, put the page in the condition.)
func TestErrorPagesNeverShown(t *testing.T) {
	t.Parallel()
	const marker = "internal-db-password-4711"
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "<html><body><h1>Server Error</h1><pre>connect db://admin:%s@db</pre></body></html>", marker)
	}))
	t.Cleanup(page.Close)
	h := newHarness(t, harnessOptions{})
	h.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "page"}, StringData: map[string]string{
		vco.SecretKeyURL: page.URL + "/api/1", vco.SecretKeyCustomer: vcosim.SeedCustomer, vco.SecretKeyJWT: h.simToken}})
	_, vc := h.cluster("page", func(vc *capvcov1.VCOCluster) { vc.Spec.CredentialsRef.Name = "page" })
	var reported string
	waitFor(h, vc, time.Minute, "a condition reporting the 500", func(vc *capvcov1.VCOCluster) bool {
		for _, c := range vc.Status.Conditions {
			if strings.Contains(c.Message, "500 Internal Server Error") {
				reported = c.Message
				return true
			}
		}
		return false
	})
	if !strings.Contains(reported, "bytes of text/html (not shown)") {
		t.Errorf("the condition does not say what the answer was: %.300s", reported)
	}
	var events corev1.EventList
	NewWithT(t).Expect(env.Client.List(context.Background(), &events, client.InNamespace(h.ns))).To(Succeed())
	shown, _ := json.Marshal([]any{vc.Status, events.Items})
	for what, s := range map[string]string{"status or events": string(shown), "log": h.logs.String()} {
		if strings.Contains(s, marker) || strings.Contains(s, "<h1>") {
			t.Errorf("the page shows in the %s", what)
		}
	}
}
