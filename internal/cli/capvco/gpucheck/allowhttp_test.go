package gpucheck_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capx-io/capx/internal/cli/capvco/gpucheck"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/gpucheck/gpuchecktest"
	"github.com/capx-io/capx/internal/vco"
)

// TestPlainHTTPNeedsTheFlag: plain http off loopback is the tools' --allow-http, never the
// credential's: a Secret still carrying allowHTTP is refused with a message naming the flag,
// a plain-http URL without the flag likewise, and with the flag the client is built and calls
// the URL (an address of TEST-NET-3).
func TestPlainHTTPNeedsTheFlag(t *testing.T) {
	f := gpuchecktest.Seed(t, false)
	remote := map[string]string{gpucheck.EnvURL: "http://203.0.113.7:9/api/1", gpucheck.EnvCustomer: f.Creds.Customer, gpucheck.EnvJWT: f.Creds.JWT}

	r := run(t, f, runOpts{env: remote}, "-location", gpuchecktest.Loc)
	wantCode(t, r, cmdutil.ExitFailure)
	if !strings.Contains(r.errOut, `"url" is http://203.0.113.7:9`) || !strings.Contains(r.errOut, "the program's --allow-http") ||
		strings.Contains(r.errOut, "--vco-allow-http") {
		t.Fatalf("without --allow-http: want a refusal naming --allow-http, stderr:\n%s", r.errOut)
	}

	// With the flag the client is built and calls the address; whatever answers there (nothing,
	// or a proxy of the test machine's network), it is not the refusal.
	r = run(t, f, runOpts{env: remote}, "-location", gpuchecktest.Loc, "--allow-http", "--api-timeout", "1s", "--api-retries", "1")
	if strings.Contains(r.errOut, "only over https") || !strings.Contains(r.errOut, "acme@203.0.113.7:9") {
		t.Fatalf("with --allow-http: want the call made, stderr:\n%s", r.errOut)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "allow-http-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "creds"}, StringData: map[string]string{
		vco.SecretKeyURL: f.Creds.URL, vco.SecretKeyCustomer: f.Creds.Customer, vco.SecretKeyJWT: f.Creds.JWT, vco.SecretKeyAllowHTTP: "true"}}
	if err := env.Client.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	for _, plugin := range []bool{false, true} {
		args := []string{"--credentials-secret", ns.Name + "/creds", "--location", gpuchecktest.Loc, "--allow-http"}
		if plugin {
			args = append([]string{"gpucheck", "orphans"}, args...)
		}
		r := run(t, f, runOpts{plugin: plugin, kube: true, env: map[string]string{}}, args...)
		wantCode(t, r, cmdutil.ExitFailure)
		if !strings.Contains(r.errOut, `"allowHTTP" is no longer honoured`) || !strings.Contains(r.errOut, "--allow-http") ||
			strings.Contains(r.errOut, f.Creds.JWT) {
			t.Fatalf("plugin=%t: a Secret with allowHTTP: stderr:\n%s", plugin, r.errOut)
		}
	}
}
