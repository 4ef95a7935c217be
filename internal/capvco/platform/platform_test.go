package platform_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capx-io/capx/internal/capvco/platform"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, testenv.Options{}, &env)) }

// TestClientFor: a credential Secret becomes a client under the program's endpoint policy;
// every refusal names the Secret and the key, never a value.
func TestClientFor(t *testing.T) {
	sim := vcosim.NewTestServer(t, vcosim.Options{})
	jwt, err := sim.Token(vcosim.SeedClusterPrinc, 0)
	if err != nil {
		t.Fatal(err)
	}
	valid := map[string][]byte{vco.SecretKeyURL: []byte("https://try.whitesky.cloud/api/1"), vco.SecretKeyCustomer: []byte("acme"), vco.SecretKeyJWT: []byte(jwt)}
	with := func(k, v string) map[string][]byte {
		out := map[string][]byte{}
		for kk, vv := range valid {
			out[kk] = vv
		}
		if v == "" {
			delete(out, k)
		} else {
			out[k] = []byte(v)
		}
		return out
	}
	ns := env.NewNamespace(t)
	for _, tc := range []struct {
		name     string
		data     map[string][]byte // nil: no Secret
		opts     vco.Options
		notFound bool
		errHas   []string
	}{
		{name: "valid", data: valid},
		{name: "missing Secret", notFound: true, errHas: []string{"Secret " + ns + "/missing-valid"}},
		{name: "no customer", data: with(vco.SecretKeyCustomer, ""), errHas: []string{`"customer"`, "/no-customer"}},
		{name: "client id without secret", data: with(vco.SecretKeyClientID, "id"), errHas: []string{`"clientSecret"`}},
		{name: "allowHTTP is no longer honoured", data: with(vco.SecretKeyAllowHTTP, "true"), errHas: []string{`"allowHTTP"`, "--vco-allow-http"}},
		{name: "plain http refused by the manager's policy", data: with(vco.SecretKeyURL, "http://vco.example.com/api/1"), errHas: []string{"--vco-allow-http", "/plain-http"}},
		{name: "plain http allowed by the program", data: with(vco.SecretKeyURL, "http://vco.example.com/api/1"), opts: vco.Options{AllowHTTP: true}},
		{name: "host outside the allow-list", data: valid, opts: vco.Options{AllowedHosts: []string{"vco.example.com"}}, errHas: []string{"--vco-allowed-hosts=vco.example.com"}},
		{name: "metadata address", data: with(vco.SecretKeyURL, "https://169.254.169.254/api/1"), errHas: []string{"link-local"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(tc.name, " ", "-")
			name = strings.Map(func(r rune) rune {
				if r >= 'a' && r <= 'z' || r == '-' {
					return r
				}
				return -1
			}, strings.ToLower(name))
			if tc.data != nil {
				if err := env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: tc.data}); err != nil {
					t.Fatal(err)
				}
			} else {
				name = "missing-valid"
			}
			api, err := platform.ClientFor(context.Background(), env.Client, platform.VCOFactory{Factory: vco.NewFactory(tc.opts)}, ns, name)
			if len(tc.errHas) == 0 {
				if err != nil || api == nil {
					t.Fatalf("client: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if errors.Is(err, platform.ErrCredentialsNotFound) != tc.notFound {
				t.Errorf("ErrCredentialsNotFound = %v, want %v: %v", !tc.notFound, tc.notFound, err)
			}
			for _, want := range tc.errHas {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if strings.Contains(err.Error(), jwt) {
				t.Errorf("the token is in the error: %v", err)
			}
		})
	}
}
