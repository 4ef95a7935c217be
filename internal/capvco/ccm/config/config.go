// Package config reads the cloud-config of capvco-cloud-controller-manager: which credential it
// uses, which CAPVCO cluster it serves and that cluster's sites. It is the file named by
// --cloud-config, written by whoever delivers the CCM into the workload cluster; every field is
// checked here so that a wrong file stops the CCM at start with a message naming the field.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/vco"
)

// Config is the cloud-config file.
type Config struct {
	// CredentialsDir holds the credential Secret mounted as files: url, customer, and jwt or
	// clientID + clientSecret + iamURL (the keys of a CAPVCO credential Secret).
	CredentialsDir string `json:"credentialsDir"`
	// Cluster is the CAPVCO cluster this CCM serves: the namespace and name of its Cluster in
	// the management cluster, from which CAPVCO names its cloudspaces.
	Cluster Cluster `json:"cluster"`
	// Sites are the cluster's cloudspaces, the primary site first (the VCOCluster's
	// spec.location, named "primary"), then spec.geo.sites.
	Sites []Site `json:"sites"`
	// LoadBalancer tunes the Service load balancers.
	LoadBalancer LoadBalancer `json:"loadBalancer,omitempty"`
	// Platform is where the credential may send the client.
	Platform Platform `json:"platform,omitempty"`
}

// Platform is where the credential may send the client (the endpoint policy of internal/vco).
type Platform = vco.PlatformConfig

// Cluster names the CAPVCO cluster.
type Cluster struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Site is one cloudspace of the cluster.
type Site struct {
	// Name is the site: "primary", or a spec.geo.sites name. It becomes the Nodes' zone.
	Name string `json:"name"`
	// Location is the site's location; it becomes the Nodes' region.
	Location string `json:"location"`
	// CloudspaceID pins the cloudspace; empty looks up CAPVCO's name for it,
	// capvco_<namespace>_<cluster>_<site>, in the location.
	CloudspaceID string `json:"cloudspaceID,omitempty"`
}

// LoadBalancer tunes the Service load balancers.
type LoadBalancer struct {
	// HealthCheckIntervalSeconds is how often the pool members are probed again (default 10).
	HealthCheckIntervalSeconds int `json:"healthCheckIntervalSeconds,omitempty"`
	// ProbeTimeoutSeconds bounds one probe (default 3).
	ProbeTimeoutSeconds int `json:"probeTimeoutSeconds,omitempty"`
	// ClusterPolicyHealthCheckPort is probed (HTTP GET /healthz) on the nodes of a Service with
	// externalTrafficPolicy Cluster: kube-proxy's health port, 10256 by default. A Service with
	// externalTrafficPolicy Local is probed on its own spec.healthCheckNodePort instead.
	ClusterPolicyHealthCheckPort *int `json:"clusterPolicyHealthCheckPort,omitempty"`
}

// Defaults.
const (
	DefaultHealthCheckInterval = 10 * time.Second
	DefaultProbeTimeout        = 3 * time.Second
	DefaultKubeProxyHealthPort = 10256
)

// HealthCheckInterval is the probe period.
func (l LoadBalancer) HealthCheckInterval() time.Duration {
	if l.HealthCheckIntervalSeconds == 0 {
		return DefaultHealthCheckInterval
	}
	return time.Duration(l.HealthCheckIntervalSeconds) * time.Second
}

// ProbeTimeout bounds one probe.
func (l LoadBalancer) ProbeTimeout() time.Duration {
	if l.ProbeTimeoutSeconds == 0 {
		return DefaultProbeTimeout
	}
	return time.Duration(l.ProbeTimeoutSeconds) * time.Second
}

// ClusterPolicyPort is the port probed for externalTrafficPolicy Cluster; 0 means Ready alone
// decides.
func (l LoadBalancer) ClusterPolicyPort() int {
	if l.ClusterPolicyHealthCheckPort == nil {
		return DefaultKubeProxyHealthPort
	}
	return *l.ClusterPolicyHealthCheckPort
}

// maxFile bounds the file: a cloud-config is a few hundred bytes.
const maxFile = 1 << 20

// Load reads and checks the file at path.
func Load(path string) (Config, error) {
	if path == "" {
		return Config{}, errors.New("--cloud-config is empty: capvco-cloud-controller-manager needs a cloud-config file naming its credential and cluster (docs/capvco/cloud-controller-manager.md)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("cloud-config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return Config{}, fmt.Errorf("cloud-config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes and checks a cloud-config. Unknown fields are refused: a field the CCM does
// not act on must not look as if it did.
func Parse(b []byte) (Config, error) {
	if len(b) > maxFile {
		return Config{}, fmt.Errorf("the file is %d bytes; a cloud-config is at most %d", len(b), maxFile)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return Config{}, errors.New("the file is empty")
	}
	var c Config
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return Config{}, fmt.Errorf("not a cloud-config: %w", err)
	}
	return c, c.Validate()
}

// Validate names every wrong field.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, a...)))
	}
	switch {
	case c.CredentialsDir == "":
		bad("credentialsDir", "is empty: name the directory where the credential Secret is mounted")
	case !filepath.IsAbs(c.CredentialsDir):
		bad("credentialsDir", "%q is not an absolute path", c.CredentialsDir)
	}
	// CAPVCO's names join these with "_", which neither may contain: that is what makes a
	// name an exact ownership test.
	if msgs := validation.IsDNS1123Label(c.Cluster.Namespace); len(msgs) > 0 {
		bad("cluster.namespace", "%q is not a namespace name: %s", c.Cluster.Namespace, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Subdomain(c.Cluster.Name); len(msgs) > 0 {
		bad("cluster.name", "%q is not a Cluster name: %s", c.Cluster.Name, strings.Join(msgs, "; "))
	}
	if len(c.Sites) == 0 {
		bad("sites", "is empty: list the cluster's sites, %q (the VCOCluster's spec.location) first", names.PrimarySite)
	}
	var seen []string
	for i, s := range c.Sites {
		f := fmt.Sprintf("sites[%d]", i)
		if msgs := validation.IsDNS1123Label(s.Name); len(msgs) > 0 || len(s.Name) > 32 {
			bad(f+".name", "%q is not a site name (a DNS label of at most 32 characters)", s.Name)
		}
		if slices.Contains(seen, s.Name) {
			bad(f+".name", "site %q is listed twice", s.Name)
		}
		seen = append(seen, s.Name)
		if s.Location == "" || strings.ContainsAny(s.Location, "/?#% \t\n") {
			bad(f+".location", "%q is not a location name such as nl-rmd-dc01-001", s.Location)
		}
		if strings.ContainsAny(s.CloudspaceID, "/?#% \t\n") {
			bad(f+".cloudspaceID", "%q is not a cloudspace id", s.CloudspaceID)
		}
	}
	if len(c.Sites) > 0 && c.Sites[0].Name != names.PrimarySite {
		bad("sites[0].name", "is %q: the first site is the primary one, %q", c.Sites[0].Name, names.PrimarySite)
	}
	lb := c.LoadBalancer
	if lb.HealthCheckIntervalSeconds < 0 || lb.HealthCheckIntervalSeconds > 3600 {
		bad("loadBalancer.healthCheckIntervalSeconds", "%d is not between 1 and 3600", lb.HealthCheckIntervalSeconds)
	}
	if lb.ProbeTimeoutSeconds < 0 || lb.ProbeTimeoutSeconds > 60 {
		bad("loadBalancer.probeTimeoutSeconds", "%d is not between 1 and 60", lb.ProbeTimeoutSeconds)
	}
	if p := lb.ClusterPolicyHealthCheckPort; p != nil && (*p < 0 || *p > 65535) {
		bad("loadBalancer.clusterPolicyHealthCheckPort", "%d is not a port (0 turns the probe off)", *p)
	}
	if _, err := vco.ParseAllowedHosts("platform.allowedHosts", c.Platform.AllowedHosts); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CloudspaceName is the name CAPVCO gives the site's cloudspace.
func (c Config) CloudspaceName(site Site) string {
	return names.Cloudspace(c.Cluster.Namespace, c.Cluster.Name, site.Name)
}

// Credentials reads the credential from CredentialsDir on every call, so a rotated Secret is
// used as soon as the kubelet has updated the files: the manager's keys and checks, caBundle
// included (vco.CredentialsFromDir). Errors name files, never their contents.
func (c Config) Credentials() (vco.Credentials, error) {
	return vco.CredentialsFromDir(c.CredentialsDir)
}
