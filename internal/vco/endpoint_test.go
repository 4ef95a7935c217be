package vco

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// TestSecretCannotAllowHTTP: a credential Secret that still carries allowHTTP is refused with a
// message naming the key and the flags that replaced it, and its plain-http URL is refused by a
// client whose program did not allow plain http, whatever the Secret says. (Today's HEAD,
// 4d97e0c, accepted both.)
func TestSecretCannotAllowHTTP(t *testing.T) {
	data := map[string][]byte{"url": []byte("http://10.96.0.12:8080/api/1"), "customer": []byte("acme"), "jwt": []byte(testJWT),
		"allowHTTP": []byte("true")}
	creds, err := CredentialsFromSecret(data)
	if err == nil {
		t.Fatal("a Secret with allowHTTP was accepted")
	}
	for _, want := range []string{`"allowHTTP" is no longer honoured`, "--vco-allow-http", "--allow-http", "delete the key"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	// A caller that ignored the error still gets no plain-http client.
	if _, err := New(creds, Options{}); err == nil || !strings.Contains(err.Error(), "--vco-allow-http") {
		t.Fatalf("plain http without the program's flag: want a refusal naming --vco-allow-http, got %v", err)
	}
	if _, err := NewFactory(Options{}).Client(creds); err == nil {
		t.Fatal("the factory built a plain-http client without the program's flag")
	}
	delete(data, "allowHTTP")
	if creds, err = CredentialsFromSecret(data); err != nil {
		t.Fatal(err)
	}
	if _, err := New(creds, Options{AllowHTTP: true}); err != nil {
		t.Fatalf("the program's AllowHTTP: %v", err)
	}
}

// TestAllowListMakesNoRequest: a credential naming a host outside the program's allow-list is
// refused when the client is built, before any request reaches the API or the IAM.
func TestAllowListMakesNoRequest(t *testing.T) {
	var requests atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"username":"svc","customers":[]}`))
	}))
	defer api.Close()
	u, _ := url.Parse(api.URL)
	creds := Credentials{URL: api.URL + "/api/1", Customer: "acme", ClientID: "svc", ClientSecret: "cs-1", IAMURL: api.URL + "/iam"}
	opts := Options{AllowedHosts: []string{"api.example.com", "iam.example.com:443"}, MaxAttempts: 1}
	_, err := New(creds, opts)
	if err == nil {
		t.Fatal("a host outside the allow-list was accepted")
	}
	for _, want := range []string{`"url" names host ` + u.Host, `"iamURL" names host ` + u.Host, "--vco-allowed-hosts=api.example.com,iam.example.com:443"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if _, err := NewFactory(opts).Client(creds); err == nil {
		t.Fatal("the factory accepted a host outside the allow-list")
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests reached a host outside the allow-list", n)
	}

	// Listed (host without a port: every port), the same credential works: the counter counts.
	c, err := New(Credentials{URL: api.URL + "/api/1", Customer: "acme", JWT: testJWT}, Options{AllowedHosts: []string{u.Hostname()}, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Me(context.Background()); err != nil {
		t.Fatal(err)
	}
	if requests.Load() == 0 {
		t.Fatal("no request counted for a listed host")
	}
}

// TestEndpointRules: the URL rules of endpoint.go, one case each.
func TestEndpointRules(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		opts      Options
		want      string // "" accepts
	}{
		{"https", "https://try.whitesky.cloud/api/1", Options{}, ""},
		{"userinfo", "https://admin:pw-hunter2@try.whitesky.cloud/api/1", Options{}, "carries a user name or password"},
		{"user without password", "https://admin@try.whitesky.cloud/api/1", Options{}, "carries a user name or password"},
		{"scheme", "ftp://try.whitesky.cloud/api/1", Options{}, "must be an https URL"},
		{"no host", "https:///api/1", Options{}, "must be an https URL"},
		{"query", "https://try.whitesky.cloud/api/1?x=1", Options{}, "query or fragment"},
		{"fragment", "https://try.whitesky.cloud/api/1#x", Options{}, "query or fragment"},
		{"metadata", "http://169.254.169.254/latest", Options{AllowHTTP: true}, "169.254.169.254, a link-local"},
		{"metadata over https", "https://169.254.169.254/", Options{}, "--vco-allowed-hosts=169.254.169.254"},
		{"metadata listed", "https://169.254.169.254/", Options{AllowedHosts: []string{"169.254.169.254"}}, ""},
		{"metadata mapped v6", "https://[::ffff:169.254.169.254]/", Options{}, "169.254.169.254, a link-local"},
		{"link-local v6", "https://[fe80::1]/", Options{}, "fe80::1, a link-local"},
		{"aws v6 metadata", "https://[fd00:ec2::254]/", Options{}, "fd00:ec2::254"},
		{"alibaba metadata", "https://100.100.100.200/", Options{}, "100.100.100.200"},
		{"unspecified", "http://0.0.0.0:8080/", Options{AllowHTTP: true}, "0.0.0.0"},
		{"tools name their own flag", "http://api.example.com/", Options{Flags: PolicyFlags{AllowHTTP: "--allow-http"}}, "program's --allow-http"},
		{"tools have no allow-list flag", "https://169.254.169.254/", Options{Flags: PolicyFlags{AllowHTTP: "--allow-http"}}, "address: refused"},
		{"listed with its port", "https://api.example.com:8443/", Options{AllowedHosts: []string{"API.example.com.:8443"}}, ""},
		{"listed on another port", "https://api.example.com/", Options{AllowedHosts: []string{"api.example.com:8443"}}, "names host api.example.com"},
		{"listed on the default port", "https://api.example.com/", Options{AllowedHosts: []string{"api.example.com:443"}}, ""},
		{"the list applies to loopback", "http://127.0.0.1:1/", Options{AllowedHosts: []string{"api.example.com"}}, "names host 127.0.0.1:1"},
		{"listed v6", "https://[2001:db8::1]:8443/", Options{AllowedHosts: []string{"[2001:db8::1]:8443"}}, ""},
		{"bad list entry", "https://api.example.com/", Options{AllowedHosts: []string{"https://api.example.com"}}, "not a URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Credentials{URL: tc.url, Customer: "acme", JWT: testJWT}, tc.opts)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("want %q, got %v", tc.want, err)
			}
			if err != nil && strings.Contains(err.Error(), "pw-hunter2") {
				t.Fatalf("the refusal shows the URL's password: %v", err)
			}
		})
	}
}

// TestParseAllowedHosts: what --vco-allowed-hosts accepts, in the form it is matched in.
func TestParseAllowedHosts(t *testing.T) {
	got, err := ParseAllowedHosts("--vco-allowed-hosts", []string{" Try.Whitesky.Cloud. ", "", "iam.example.com:8443", "::1", "[2001:db8::1]:443", "10.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"try.whitesky.cloud", "iam.example.com:8443", "[::1]", "[2001:db8::1]:443", "10.0.0.1"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"https://try.whitesky.cloud", "try.whitesky.cloud/api", "host:0", "host:99999", "host:x", "a b", "user@host"} {
		if _, err := ParseAllowedHosts("--vco-allowed-hosts", []string{bad}); err == nil || !strings.Contains(err.Error(), "--vco-allowed-hosts entry") {
			t.Errorf("%q: want an error naming the flag, got %v", bad, err)
		}
	}
}

// TestTransportRefusesMetadataAddresses: the client's own transport refuses to connect to a
// metadata address whatever name led there, before a packet is sent, and does not retry.
func TestTransportRefusesMetadataAddresses(t *testing.T) {
	p, err := newPolicy(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"169.254.169.254:80", "[fe80::1]:443", "[fd00:ec2::254]:80", "0.0.0.0:443"} {
		_, err := guardedTransport(p).DialContext(context.Background(), "tcp", addr)
		if !errors.Is(err, errRefusedAddress) || !strings.Contains(err.Error(), "--vco-allowed-hosts") {
			t.Errorf("%s: want a refusal naming --vco-allowed-hosts, got %v", addr, err)
		}
	}
	for _, addr := range []string{"203.0.113.7:443", "127.0.0.1:80", "[2001:db8::1]:443"} {
		if err := p.refuseSpecial("tcp", addr, nil); err != nil {
			t.Errorf("%s refused: %v", addr, err)
		}
	}
	listed, _ := newPolicy(Options{AllowedHosts: []string{"169.254.169.254:80"}})
	if err := listed.refuseSpecial("tcp", "169.254.169.254:80", nil); err != nil {
		t.Errorf("a listed metadata address was refused: %v", err)
	}
	if err := listed.refuseSpecial("tcp", "169.254.169.254:8080", nil); err == nil {
		t.Error("a listed address was allowed on another port")
	}

	// Through a client (the metadata address listed as a name would resolve: the URL check
	// passes, the connection is refused): an error that is not transient. No proxy, so the
	// dial is the client's own whatever the environment says.
	tr := guardedTransport(p)
	tr.Proxy = nil
	opts := Options{MaxAttempts: 5, HTTPClient: &http.Client{Transport: tr}}.withDefaults()
	c := &Client{base: "http://169.254.169.254", customer: "acme", opts: opts, tokens: newTokenSource(Credentials{JWT: testJWT}, opts.HTTPClient, opts.Now),
		sem: make(chan struct{}, 1), metrics: newMetrics(nil)}
	_, err = c.Me(context.Background())
	if !errors.Is(err, errRefusedAddress) || IsTransient(err) {
		t.Fatalf("want a final refusal, got %v", err)
	}
}
