package localcluster

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"sigs.k8s.io/yaml"
)

// A machine of a platform network boots a prepared node: the binaries of this checkout, with
// no kubeadm. What it becomes is in its bootstrap data, which travels the way a bootstrap
// provider's does (a Secret the Machine names, the VM's cloud-init user data): a cloud-config
// whose write_files holds a NodeBootstrap document at NodeBootstrapPath. A control-plane
// machine runs etcd, the API server, the controller manager and the scheduler with the cluster
// CA it is given and creates the bootstrap token; every machine's kubelet joins through the
// API endpoint with that token (TLS bootstrapping: a CSR the controller manager approves and
// signs), as `kubeadm join` does.

// NodeBootstrapPath is where the bootstrap document sits in the cloud-config's write_files.
const NodeBootstrapPath = "/etc/capx/node-bootstrap.yaml"

// Roles of a machine.
const (
	RoleControlPlane = "control-plane"
	RoleWorker       = "worker"
)

// NodeBootstrap is what a machine boots as.
type NodeBootstrap struct {
	// Role is control-plane or worker.
	Role string `json:"role"`
	// Cluster names the workload cluster (the controller manager's --cluster-name).
	Cluster string `json:"cluster"`
	// Endpoint is host:port of the cluster's API server as the kubelets reach it: the platform
	// load balancer's address.
	Endpoint string `json:"endpoint"`
	// CACert is the cluster CA (PEM). CAKey (PEM, PKCS #8) and ServiceAccountKey (PEM, PKCS #8)
	// are the control plane's only.
	CACert            string `json:"caCert"`
	CAKey             string `json:"caKey,omitempty"`
	ServiceAccountKey string `json:"serviceAccountKey,omitempty"`
	// Token is the bootstrap token, <6 characters>.<16 characters> of [a-z0-9]: the control plane
	// creates it, every kubelet joins with it.
	Token string `json:"token"`
	// ServiceCIDR and PodCIDR are the cluster's ranges; each machine's pods get the /24 of
	// PodCIDR numbered after the last octet of its private address.
	ServiceCIDR string `json:"serviceCIDR"`
	PodCIDR     string `json:"podCIDR"`
}

// maxUserData bounds what is parsed: the platform's own limit is far below this.
const maxUserData = 1 << 20

// ParseUserData finds the NodeBootstrap in a machine's user data and checks it.
func ParseUserData(userData string) (NodeBootstrap, error) {
	var nb NodeBootstrap
	if len(userData) > maxUserData {
		return nb, fmt.Errorf("user data is %d bytes, more than %d", len(userData), maxUserData)
	}
	if !strings.HasPrefix(userData, "#cloud-config\n") {
		return nb, errors.New("user data is not a cloud-config (it must start with #cloud-config): the platform network's machines boot only the prepared node's bootstrap document")
	}
	var cc struct {
		WriteFiles []struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		} `json:"write_files"`
	}
	if err := yaml.Unmarshal([]byte(userData), &cc); err != nil {
		return nb, fmt.Errorf("user data: %w", err)
	}
	for _, f := range cc.WriteFiles {
		if f.Path != NodeBootstrapPath {
			continue
		}
		if err := yaml.UnmarshalStrict([]byte(f.Content), &nb); err != nil {
			return nb, fmt.Errorf("user data: %s: %w", NodeBootstrapPath, err)
		}
		return nb, nb.Validate()
	}
	return nb, fmt.Errorf("user data has no %s in write_files: it is not a prepared node's bootstrap data", NodeBootstrapPath)
}

// Validate checks every field, naming the first that is wrong.
func (nb NodeBootstrap) Validate() error {
	if nb.Role != RoleControlPlane && nb.Role != RoleWorker {
		return fmt.Errorf("role %q: want %s or %s", nb.Role, RoleControlPlane, RoleWorker)
	}
	if nb.Cluster == "" {
		return errors.New("cluster is empty")
	}
	if _, _, err := net.SplitHostPort(nb.Endpoint); err != nil {
		return fmt.Errorf("endpoint %q: want host:port: %w", nb.Endpoint, err)
	}
	if _, err := parseCertPEM(nb.CACert); err != nil {
		return fmt.Errorf("caCert: %w", err)
	}
	if nb.Role == RoleControlPlane {
		if _, err := parseKeyPEM(nb.CAKey); err != nil {
			return fmt.Errorf("caKey: %w", err)
		}
		if _, err := parseKeyPEM(nb.ServiceAccountKey); err != nil {
			return fmt.Errorf("serviceAccountKey: %w", err)
		}
	} else if nb.CAKey != "" || nb.ServiceAccountKey != "" {
		return errors.New("a worker's bootstrap data carries no caKey or serviceAccountKey")
	}
	if _, _, err := splitToken(nb.Token); err != nil {
		return err
	}
	svc, err := netip.ParsePrefix(nb.ServiceCIDR)
	if err != nil || !svc.Addr().Is4() || svc.Bits() > 24 {
		return fmt.Errorf("serviceCIDR %q: want an IPv4 prefix of /24 or wider", nb.ServiceCIDR)
	}
	pods, err := netip.ParsePrefix(nb.PodCIDR)
	if err != nil || !pods.Addr().Is4() || pods.Bits() > 16 {
		return fmt.Errorf("podCIDR %q: want an IPv4 prefix of /16 or wider (each machine's pods get a /24 of it)", nb.PodCIDR)
	}
	if svc.Overlaps(pods) {
		return errors.New("serviceCIDR and podCIDR overlap")
	}
	return nil
}

func splitToken(t string) (id, secret string, err error) {
	id, secret, ok := strings.Cut(t, ".")
	if !ok || len(id) != 6 || len(secret) != 16 || strings.Trim(id+secret, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
		return "", "", errors.New("token: want a bootstrap token, 6 and 16 characters of [a-z0-9] joined by a dot")
	}
	return id, secret, nil
}

// UserData renders the bootstrap document as the cloud-config a Machine's bootstrap Secret
// holds (its "value").
func (nb NodeBootstrap) UserData() ([]byte, error) {
	if err := nb.Validate(); err != nil {
		return nil, err
	}
	return nb.cloudConfig()
}

// cloudConfig renders the document, checked or not, as a cloud-config.
func (nb NodeBootstrap) cloudConfig() ([]byte, error) {
	doc, err := yaml.Marshal(nb)
	if err != nil {
		return nil, err
	}
	cc, err := yaml.Marshal(map[string]any{"write_files": []map[string]string{{
		"path": NodeBootstrapPath, "permissions": "0600", "content": string(doc),
	}}})
	if err != nil {
		return nil, err
	}
	return append([]byte("#cloud-config\n"), cc...), nil
}

// ClusterSecrets are what a bootstrap provider keeps for one workload cluster: its CA, the
// service-account signing key and a bootstrap token.
type ClusterSecrets struct {
	CACert, CAKey, ServiceAccountKey string // PEM
	Token                            string
}

// NewClusterSecrets makes them (ECDSA P-256, like the local cluster's own PKI).
func NewClusterSecrets(cluster string) (ClusterSecrets, error) {
	var s ClusterSecrets
	ca, err := newCert(nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: cluster + "-ca"},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	})
	if err != nil {
		return s, err
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return s, err
	}
	raw := make([]byte, 11)
	if _, err := rand.Read(raw); err != nil {
		return s, err
	}
	// 22 hex digits: lowercase letters and digits, as a bootstrap token wants.
	tok := hex.EncodeToString(raw)
	s.CACert = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}))
	s.CAKey = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: mustPKCS8(ca.key)}))
	s.ServiceAccountKey = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: mustPKCS8(sa)}))
	s.Token = tok[:6] + "." + tok[6:]
	return s, nil
}

// Bootstrap is the bootstrap document of a machine of the cluster in role.
func (s ClusterSecrets) Bootstrap(role, cluster, endpoint, serviceCIDR, podCIDR string) NodeBootstrap {
	nb := NodeBootstrap{Role: role, Cluster: cluster, Endpoint: endpoint, CACert: s.CACert, Token: s.Token,
		ServiceCIDR: serviceCIDR, PodCIDR: podCIDR}
	if role == RoleControlPlane {
		nb.CAKey, nb.ServiceAccountKey = s.CAKey, s.ServiceAccountKey
	}
	return nb
}

func parseCertPEM(s string) (*x509.Certificate, error) {
	b, _ := pem.Decode([]byte(s))
	if b == nil || b.Type != "CERTIFICATE" || len(bytes.TrimSpace([]byte(s))) == 0 {
		return nil, errors.New("want one PEM CERTIFICATE")
	}
	return x509.ParseCertificate(b.Bytes)
}

func parseKeyPEM(s string) (*ecdsa.PrivateKey, error) {
	b, _ := pem.Decode([]byte(s))
	if b == nil || b.Type != "PRIVATE KEY" {
		return nil, errors.New("want one PEM PRIVATE KEY (PKCS #8)")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, err
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("want an ECDSA key")
	}
	return ec, nil
}
