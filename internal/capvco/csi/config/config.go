// Package config reads the file capvco-csi-driver is started with (--config): its credential,
// the CAPVCO cluster it serves, that cluster's sites and how encrypted volumes get their keys.
// Whoever delivers the driver writes it; every field is checked here, so a wrong file stops the
// driver at start with a message naming the field.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/vco"
)

// Config is the driver's file.
type Config struct {
	// CredentialsDir holds the credential Secret mounted as files (url, customer, and jwt or
	// clientID + clientSecret + iamURL). The controller needs it; the node plugin does not.
	CredentialsDir string `json:"credentialsDir,omitempty"`
	// Cluster is the CAPVCO cluster: the namespace and name of its Cluster in the management
	// cluster. The driver marks its disks with it and touches no disk without the mark.
	Cluster Cluster `json:"cluster"`
	// Sites are the cluster's cloudspaces, the primary site first.
	Sites []Site `json:"sites"`
	// Encryption is the cluster's VCOCluster.spec.encryption.
	Encryption Encryption `json:"encryption"`
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

// String is namespace/name.
func (c Cluster) String() string { return c.Namespace + "/" + c.Name }

// Site is one cloudspace of the cluster.
type Site struct {
	Name         string `json:"name"`
	Location     string `json:"location"`
	CloudspaceID string `json:"cloudspaceID,omitempty"`
}

// Vault modes of VCOCluster.spec.encryption.vaultMode.
const (
	VaultNone     = "none"
	VaultExternal = "external"
	VaultManaged  = "managed"
)

// Encryption says where the keys of encrypted volumes come from.
type Encryption struct {
	// VaultMode is none (no vault: an encrypted StorageClass is refused) or external (a
	// Vault or OpenBao transit key wraps each volume's own key). managed is refused.
	VaultMode string `json:"vaultMode"`
	// Transit is the external vault's transit engine; only with vaultMode external.
	Transit *Transit `json:"transit,omitempty"`
}

// Transit is a Vault/OpenBao transit key.
type Transit struct {
	// Address is the vault, e.g. https://vault.example.com:8200 (the VCOCluster's vaultAddress).
	Address string `json:"address"`
	// Mount is the transit engine's mount path; default "transit".
	Mount string `json:"mount,omitempty"`
	// Key is the transit key that wraps the volume keys.
	Key string `json:"key"`
	// TokenFile holds a vault token allowed to call datakey and decrypt on Key.
	TokenFile string `json:"tokenFile"`
	// Namespace is the Vault Enterprise / OpenBao namespace, if any.
	Namespace string `json:"namespace,omitempty"`
	// CAFile is a PEM bundle to trust for Address instead of the system roots.
	CAFile string `json:"caFile,omitempty"`
}

// MountPath is the transit mount, defaulted.
func (t Transit) MountPath() string {
	if t.Mount == "" {
		return "transit"
	}
	return strings.Trim(t.Mount, "/")
}

const maxFile = 1 << 20

// Load reads and checks the file at path.
func Load(path string) (Config, error) {
	if path == "" {
		return Config{}, errors.New("--config is empty: capvco-csi-driver needs a config file naming its cluster and sites (docs/capvco/storage.md)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes and checks a config. Unknown fields are refused: a field the driver does not
// act on must not look as if it did.
func Parse(b []byte) (Config, error) {
	if len(b) > maxFile {
		return Config{}, fmt.Errorf("the file is %d bytes; a config is at most %d", len(b), maxFile)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return Config{}, errors.New("the file is empty")
	}
	var c Config
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return Config{}, fmt.Errorf("not a capvco-csi-driver config: %w", err)
	}
	return c, c.Validate()
}

// Validate names every wrong field.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, a...)))
	}
	if c.CredentialsDir != "" && !filepath.IsAbs(c.CredentialsDir) {
		bad("credentialsDir", "%q is not an absolute path", c.CredentialsDir)
	}
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
	errs = append(errs, c.Encryption.validate()...)
	if _, err := vco.ParseAllowedHosts("platform.allowedHosts", c.Platform.AllowedHosts); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (e Encryption) validate() []error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, a...)))
	}
	switch e.VaultMode {
	case VaultNone:
		if e.Transit != nil {
			bad("encryption.transit", "is set but vaultMode is none: set vaultMode external to use it, or remove it")
		}
	case VaultExternal:
		if e.Transit == nil {
			bad("encryption.transit", "is required with vaultMode external: the address, key and tokenFile of the transit key")
			break
		}
		t := *e.Transit
		if u, err := url.Parse(t.Address); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			bad("encryption.transit.address", "%q is not a vault address such as https://vault.example.com:8200", t.Address)
		}
		if t.Key == "" || strings.ContainsAny(t.Key, "/?#% \t\n") {
			bad("encryption.transit.key", "%q is not a transit key name", t.Key)
		}
		if strings.ContainsAny(t.MountPath(), "?#% \t\n") || strings.Contains(t.MountPath(), "..") {
			bad("encryption.transit.mount", "%q is not a mount path", t.Mount)
		}
		if !filepath.IsAbs(t.TokenFile) {
			bad("encryption.transit.tokenFile", "%q is not an absolute path to a file holding the vault token", t.TokenFile)
		}
		if t.CAFile != "" && !filepath.IsAbs(t.CAFile) {
			bad("encryption.transit.caFile", "%q is not an absolute path", t.CAFile)
		}
	case VaultManaged:
		bad("encryption.vaultMode", "managed is not supported: CAPVCO does not deploy or operate a vault; use none, or external with your own Vault or OpenBao (docs/capvco/storage.md)")
	case "":
		bad("encryption.vaultMode", "is empty: none, or external")
	default:
		bad("encryption.vaultMode", "%q is not none or external", e.VaultMode)
	}
	return errs
}

// Locations are the cluster's locations, the primary site's first, each once.
func (c Config) Locations() []string {
	var out []string
	for _, s := range c.Sites {
		if !slices.Contains(out, s.Location) {
			out = append(out, s.Location)
		}
	}
	return out
}

// CloudspaceName is the name CAPVCO gives the site's cloudspace.
func (c Config) CloudspaceName(site Site) string {
	return names.Cloudspace(c.Cluster.Namespace, c.Cluster.Name, site.Name)
}

// Credentials reads the credential from CredentialsDir on every call, so a rotated Secret is
// used as soon as the kubelet has updated the files: the manager's keys and checks, caBundle
// included (vco.CredentialsFromDir). Errors name files, never their contents.
func (c Config) Credentials() (vco.Credentials, error) {
	if c.CredentialsDir == "" {
		return vco.Credentials{}, errors.New("credentialsDir is empty: the controller needs the location-scoped credential mounted there")
	}
	return vco.CredentialsFromDir(c.CredentialsDir)
}

// ReadBounded reads a secret file of at most 64 KiB.
func ReadBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	const limit = 64 << 10
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, errors.New("larger than 64 KiB")
	}
	return b, nil
}
