package vco

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

const testJWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJl"

// TestPlainHTTPRefused: the JWT and the client secret never travel over plain http except to
// a loopback host or when the program allows it (a simulator in the cluster): the Secret
// cannot ask for it.
func TestPlainHTTPRefused(t *testing.T) {
	base := map[string]string{"customer": "acme", "jwt": testJWT}
	for _, tc := range []struct {
		name string
		set  map[string]string
		want string // "" accepts
	}{
		{"https", map[string]string{"url": "https://api.example.com/api/1"}, ""},
		{"http API", map[string]string{"url": "http://api.example.com/api/1"}, `"url" is http://api.example.com`},
		{"http IAM", map[string]string{"url": "https://api.example.com/api/1", "iamURL": "http://iam.example.com"}, `"iamURL" is http://iam.example.com`},
		{"bad IAM", map[string]string{"url": "https://api.example.com/api/1", "iamURL": "iam.example.com"}, `"iamURL" must be an https URL`},
		{"loopback", map[string]string{"url": "http://127.0.0.1:8080/api/1", "iamURL": "http://localhost:8080/iam"}, ""},
		{"loopback v6", map[string]string{"url": "http://[::1]:8080/api/1"}, ""},
		{"simulator in the cluster", map[string]string{"url": "http://10.96.0.12:8080/api/1", "iamURL": "http://10.96.0.12:8080/iam", "allowHTTP": "true"},
			`"allowHTTP" is no longer honoured`},
		{"allowHTTP names the flags", map[string]string{"url": "http://10.96.0.12:8080/api/1", "allowHTTP": "yes"}, "the manager: --vco-allow-http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := map[string][]byte{}
			for k, v := range base {
				data[k] = []byte(v)
			}
			for k, v := range tc.set {
				data[k] = []byte(v)
			}
			// What the manager does with a Secret: read it, then build the client under its
			// own policy (here the default one, no --vco-allow-http).
			creds, err := CredentialsFromSecret(data)
			if err == nil {
				_, err = New(creds, Options{})
			}
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("want %q, got %v", tc.want, err)
			}
		})
	}
	creds := Credentials{URL: "http://vcosim.vcosim.svc:8080/api/1", Customer: "acme", JWT: testJWT}
	if _, err := New(creds, Options{}); err == nil {
		t.Fatal("http to a cluster service without AllowHTTP must be refused")
	}
	if _, err := New(creds, Options{AllowHTTP: true}); err != nil {
		t.Fatalf("Options.AllowHTTP: %v", err)
	}
}

// TestCredentialsStringHidesURLSecrets: a password or a token in the URL never shows.
func TestCredentialsStringHidesURLSecrets(t *testing.T) {
	c := Credentials{URL: "https://admin:hunter2-pw@api.example.com/api/1?token=q-tok-99#frag", Customer: "acme",
		ClientID: "svc", ClientSecret: "cs-secret-1", JWT: testJWT}
	for _, s := range []string{c.String(), c.GoString(), fmt.Sprintf("%v %+v %#v", c, c, c)} {
		for _, secret := range []string{"hunter2-pw", "q-tok-99", "cs-secret-1", testJWT} {
			if strings.Contains(s, secret) {
				t.Fatalf("%q shows %q", s, secret)
			}
		}
		if !strings.Contains(s, "api.example.com/api/1") || !strings.Contains(s, "client svc") {
			t.Fatalf("%q lost what it should show", s)
		}
	}
}

// TestAPIErrorRedaction: a JWT is removed from field names too, and an echoed client secret
// from everywhere.
func TestAPIErrorRedaction(t *testing.T) {
	body := `{"message":"invalid client_secret=cs-echoed-7 for client svc","errors":{"` + testJWT + `":"bad token",` +
		`"client_secret":"cs-echoed-7 is wrong","form":"client_secret: \"cs-echoed-7\""}}`
	e := newAPIError(op{name: "IAMToken", method: "POST", path: "/v1/oauth/access_token"}, 400, []byte(body), 0)
	if s := e.Error(); strings.Contains(s, testJWT) || strings.Contains(s, "cs-echoed-7") {
		t.Fatalf("pattern redaction missed: %s", s)
	}
	e = newAPIError(op{name: "Me", method: "GET", path: "/me"}, 401, []byte(`{"message":"token s3cr3t-value not valid"}`), 0).scrub("s3cr3t-value")
	if strings.Contains(e.Error(), "s3cr3t-value") {
		t.Fatalf("known secret not scrubbed: %s", e.Error())
	}
}

// TestIAMEchoingTheSecret: an IAM that repeats the client secret in its error answer, in words
// no pattern knows, does not get it into the client's error.
func TestIAMEchoingTheSecret(t *testing.T) {
	const secret = "wrong-but-real-secret-4c1d"
	iam := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(b))
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"message":"nothing matches %s","errors":{"%s":"unknown"}}`, form.Get("client_secret"), form.Get("client_secret"))
	}))
	defer iam.Close()
	c, err := New(Credentials{URL: iam.URL + "/api/1", Customer: "acme", ClientID: "svc", ClientSecret: secret, IAMURL: iam.URL},
		Options{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Me(context.Background())
	if !errors.Is(err, ErrUnauthorized) || strings.Contains(err.Error(), secret) {
		t.Fatalf("want unauthorized without the secret, got %v", err)
	}
}

// TestRedirectsRefused: a redirect to another host or from https to http is not followed, so
// the bearer token stays with the API.
func TestRedirectsRefused(t *testing.T) {
	var leaked []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked = append(leaked, r.Header.Get("Authorization"))
	}))
	defer other.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer api.Close()
	c, err := New(Credentials{URL: api.URL + "/api/1", Customer: "acme", JWT: testJWT}, Options{MaxAttempts: 1, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Me(context.Background())
	if err == nil || !strings.Contains(err.Error(), "refusing a redirect") || len(leaked) > 0 {
		t.Fatalf("a redirect to another host was followed: err %v, the other host saw %q", err, leaked)
	}

	check := safeRedirect(nil)
	req := func(u string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, u, nil)
		return r
	}
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"https://api.example.com/a", "https://api.example.com/b", true},
		{"http://127.0.0.1:1/a", "https://127.0.0.1:1/b", true},
		{"https://api.example.com/a", "http://api.example.com/b", false},
		{"https://api.example.com/a", "https://evil.example.com/b", false},
		{"https://api.example.com/a", "https://api.example.com:8443/b", false},
	} {
		if err := check(req(tc.to), []*http.Request{req(tc.from)}); (err == nil) != tc.ok {
			t.Errorf("%s -> %s: %v", tc.from, tc.to, err)
		}
	}
}
