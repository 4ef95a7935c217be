package vcosim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func do(t *testing.T, s *Server, method, path, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func token(t *testing.T, s *Server, p string) string {
	t.Helper()
	tok, err := s.Token(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

const createCS = `{"name":"demo","location":"nl-rmd-dc01-001","firewall":{"private":false}}`

func TestPersistenceSurvivesRestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "state.json")
	s := NewTestServer(t, Options{StateFile: file})
	tok := token(t, s, SeedClusterPrinc)
	if code, body := do(t, s, "POST", "/api/1/customers/acme/cloudspaces", tok, createCS); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again := NewTestServer(t, Options{StateFile: file})
	code, body := do(t, again, "GET", "/api/1/customers/acme/cloudspaces", tok, "")
	if code != 200 || !strings.Contains(body, `"name":"demo"`) {
		t.Fatalf("after restart (old token): %d %s", code, body)
	}
}

func TestErrorsAndStrictQuery(t *testing.T) {
	s := NewTestServer(t, Options{StrictQuery: true})
	tok := token(t, s, SeedClusterPrinc)
	cases := []struct {
		name, method, path, token, body string
		code                            int
		inBody                          string
	}{
		{"no token", "GET", "/api/1/me", "", "", 401, "Bearer"},
		{"bad token", "GET", "/api/1/me", "a.b.c", "", 401, "invalid JWT"},
		{"unknown route", "GET", "/api/1/nothing", tok, "", 404, "not found"},
		{"missing required", "POST", "/api/1/customers/acme/cloudspaces", tok, `{"name":"x"}`, 400, "'location' is a required property"},
		{"typo in query", "DELETE", "/api/1/customers/acme/cloudspaces/cs-1?permanent=true", tok, "", 400, "Unknown parameter"},
		{"other customer", "GET", "/api/1/customers/other/cloudspaces", tok, "", 404, "Customer not found"},
		{"no access to location", "GET", "/api/1/customers/acme/locations/xx-nowhere/disks", tok, "", 403, "no access to location"},
		{"sim endpoints need an operator", "GET", "/sim/v1/state", tok, "", 403, "operator"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do(t, s, tc.method, tc.path, tc.token, tc.body)
			if code != tc.code || !strings.Contains(body, tc.inBody) {
				t.Fatalf("got %d %s", code, body)
			}
			var e map[string]any
			if json.Unmarshal([]byte(body), &e) != nil || e["message"] == nil {
				t.Fatalf("error body is not {\"message\": ...}: %s", body)
			}
		})
	}
}

func TestFaultsOverHTTP(t *testing.T) {
	s := NewTestServer(t, Options{})
	admin := token(t, s, SeedOperatorPrinc)
	set := `{"scripts":{"GET /me":[{"status":429,"retry_after":"2s"},{},{"status":503}]}}`
	if code, body := do(t, s, "PUT", "/sim/v1/faults", admin, set); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	req, _ := http.NewRequest("GET", s.APIURL()+"/me", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("got %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for _, want := range []int{200, 503, 200} {
		if code, _ := do(t, s, "GET", "/api/1/me", admin, ""); code != want {
			t.Fatalf("got %d, want %d", code, want)
		}
	}
}

func TestPrintSecret(t *testing.T) {
	s := NewTestServer(t, Options{})
	var out bytes.Buffer
	if err := s.printSecret(&out, SeedClusterPrinc, "creds", "capvco-system"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: Secret", "name: creds", "url: " + s.APIURL(), "customer: acme", "jwt: ey", "clientID: capvco", "iamURL: " + s.IAMURL(), "--vco-allow-http", "--allow-http"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("missing %q in\n%s", want, out.String())
		}
	}
	// The key a credential could once allow plain http with is refused now: printing it would
	// make the Secret unusable.
	if strings.Contains(out.String(), "allowHTTP") {
		t.Fatalf("the printed Secret carries allowHTTP:\n%s", out.String())
	}
}

func TestMainFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main([]string{"-no-such-flag"}, &out, &errOut); code != 2 {
		t.Fatalf("exit %d", code)
	}
	if code := Main([]string{"-listen", "256.0.0.1:1"}, &out, &errOut); code != 1 {
		t.Fatalf("exit %d, stderr %s", code, errOut.String())
	}
}

func TestConnectionBecomesConnected(t *testing.T) {
	now := time.Now()
	s := NewTestServer(t, Options{TimeScale: 1, Now: func() time.Time { return now }, Delays: Delays{CloudspaceCreate: time.Nanosecond}})
	s.mu.Lock()
	s.st.Links = append(s.st.Links, &Link{A: "a", B: "b", Created: now.UnixMilli()})
	s.mu.Unlock()
	if l := s.linkBetween("b", "a"); l == nil {
		t.Fatal("links are symmetric")
	}
	if d := s.scaled(s.delays.LinkConnect); d != 10*time.Second {
		t.Fatalf("link connect delay %v", d)
	}
}
