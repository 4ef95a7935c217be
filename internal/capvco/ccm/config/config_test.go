package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capx-io/capx/internal/vco"
)

const good = `
credentialsDir: /etc/capvco/credentials
cluster: {namespace: team-a, name: prod}
sites:
- {name: primary, location: nl-rmd-dc01-001}
- {name: west, location: be-mac-dc01-001, cloudspaceID: cs-9}
loadBalancer: {healthCheckIntervalSeconds: 5, clusterPolicyHealthCheckPort: 0}
`

func TestParse(t *testing.T) {
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.CloudspaceName(c.Sites[1]); got != "capvco_team-a_prod_west" {
		t.Errorf("CloudspaceName = %q", got)
	}
	if c.LoadBalancer.HealthCheckInterval() != 5*time.Second || c.LoadBalancer.ProbeTimeout() != DefaultProbeTimeout || c.LoadBalancer.ClusterPolicyPort() != 0 {
		t.Errorf("load balancer settings: %+v", c.LoadBalancer)
	}
	var none LoadBalancer
	if none.ClusterPolicyPort() != DefaultKubeProxyHealthPort || none.HealthCheckInterval() != DefaultHealthCheckInterval {
		t.Errorf("defaults: %d %v", none.ClusterPolicyPort(), none.HealthCheckInterval())
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"empty", "  \n", "the file is empty"},
		{"not yaml", "{", "not a cloud-config"},
		{"unknown field", good + "regionLabel: x\n", `unknown field "regionLabel"`},
		{"no credentials", "cluster: {namespace: a, name: b}\nsites: [{name: primary, location: l}]", "credentialsDir: is empty"},
		{"relative credentials", "credentialsDir: creds\ncluster: {namespace: a, name: b}\nsites: [{name: primary, location: l}]", "not an absolute path"},
		{"underscore namespace", "credentialsDir: /c\ncluster: {namespace: a_b, name: b}\nsites: [{name: primary, location: l}]", "cluster.namespace"},
		{"no cluster name", "credentialsDir: /c\ncluster: {namespace: a}\nsites: [{name: primary, location: l}]", "cluster.name"},
		{"no sites", "credentialsDir: /c\ncluster: {namespace: a, name: b}", "sites: is empty"},
		{"primary not first", "credentialsDir: /c\ncluster: {namespace: a, name: b}\nsites: [{name: west, location: l}]", `the first site is the primary one`},
		{"duplicate site", "credentialsDir: /c\ncluster: {namespace: a, name: b}\nsites: [{name: primary, location: l}, {name: primary, location: m}]", "listed twice"},
		{"bad location", "credentialsDir: /c\ncluster: {namespace: a, name: b}\nsites: [{name: primary, location: 'a/b'}]", "sites[0].location"},
		{"bad site name", "credentialsDir: /c\ncluster: {namespace: a, name: b}\nsites: [{name: primary, location: l}, {name: West_1, location: l}]", "sites[1].name"},
		{"interval", "credentialsDir: /c\ncluster: {namespace: a, name: b}\nsites: [{name: primary, location: l}]\nloadBalancer: {healthCheckIntervalSeconds: -1}", "healthCheckIntervalSeconds"},
		{"port", "credentialsDir: /c\ncluster: {namespace: a, name: b}\nsites: [{name: primary, location: l}]\nloadBalancer: {clusterPolicyHealthCheckPort: 70000}", "clusterPolicyHealthCheckPort"},
		{"huge", strings.Repeat("#", maxFile+1), "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	if _, err := Load(""); err == nil || !strings.Contains(err.Error(), "--cloud-config") {
		t.Errorf("empty path: %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing file loaded")
	}
	p := filepath.Join(t.TempDir(), "cloud.yaml")
	if err := os.WriteFile(p, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := Load(p); err != nil || c.Cluster.Name != "prod" {
		t.Errorf("Load = %+v, %v", c, err)
	}
}

func TestCredentials(t *testing.T) {
	dir := t.TempDir()
	c := Config{CredentialsDir: dir}
	write := func(k, v string) {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(vco.SecretKeyURL, "https://vco.example.com/api/1\n")
	_, err := c.Credentials()
	if err == nil || !strings.Contains(err.Error(), `"customer"`) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("missing customer: %v", err)
	}
	write(vco.SecretKeyCustomer, "acme")
	write(vco.SecretKeyClientID, "ccm")
	write(vco.SecretKeyClientSecret, "s3cret-value")
	write(vco.SecretKeyIAMURL, "https://iam.example.com")
	creds, err := c.Credentials()
	if err != nil {
		t.Fatal(err)
	}
	if creds.Customer != "acme" || creds.ClientSecret != "s3cret-value" || creds.URL != "https://vco.example.com/api/1" {
		t.Errorf("creds = %v", creds)
	}
	write(vco.SecretKeyJWT, strings.Repeat("x", 64<<10+1))
	if _, err := c.Credentials(); err == nil || strings.Contains(err.Error(), "xxxx") {
		t.Errorf("an oversized jwt: %v", err)
	}
}

// FuzzParse: the cloud-config is operator input; Parse must never panic, and whatever it
// accepts must be valid.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("credentialsDir: /c\ncluster: {namespace: a, name: b}\nsites: [{name: primary, location: l}]"))
	f.Add([]byte("sites: [{}]\nloadBalancer: {clusterPolicyHealthCheckPort: null}"))
	f.Add([]byte("[]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a config Validate refuses: %v", err)
		}
		if !filepath.IsAbs(c.CredentialsDir) || len(c.Sites) == 0 {
			t.Fatalf("accepted %+v", c)
		}
	})
}

// TestPlatform: the platform block is the client's endpoint policy, and refusals name its
// fields; a bad allow-list entry stops the file.
func TestPlatform(t *testing.T) {
	c, err := Parse([]byte(good + "platform: {allowHTTP: true, allowedHosts: [vcosim.capvco-system.svc:8080]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	o := c.Platform.ClientOptions()
	if !o.AllowHTTP || len(o.AllowedHosts) != 1 || o.Flags.AllowHTTP != "platform.allowHTTP" {
		t.Fatalf("options %+v", o)
	}
	creds := vco.Credentials{URL: "http://vco.example.com/api/1", Customer: "acme", JWT: testJWT}
	for _, tc := range []struct {
		name     string
		platform Platform
		want     string
	}{
		{"plain http without allowHTTP", Platform{}, "platform.allowHTTP"},
		{"host not listed", Platform{AllowHTTP: true, AllowedHosts: []string{"vcosim:8080"}}, "platform.allowedHosts=vcosim:8080"},
		{"allowed", Platform{AllowHTTP: true, AllowedHosts: []string{"vco.example.com"}}, ""},
	} {
		_, err := vco.New(creds, tc.platform.ClientOptions())
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := Parse([]byte(good + "platform: {allowedHosts: ['https://vco.example.com/']}\n")); err == nil || !strings.Contains(err.Error(), "platform.allowedHosts") {
		t.Errorf("a URL in allowedHosts: %v", err)
	}
}

// testJWT is a well-formed token (header.payload.signature) for the client's format check.
const testJWT = "eyJhbGciOiJIUzI1NiJ9.eyJleHAiOjQxMDI0NDQ4MDB9.c2ln"
