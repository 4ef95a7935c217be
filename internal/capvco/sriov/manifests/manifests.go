// Package manifests renders the SR-IOV add-on for a workload cluster: its namespace
// (whitesky-sriov-cni), the agent's ServiceAccount and its one permission (get nodes), and the
// DaemonSet that runs capvco-sriov-agent on every worker and installs the capvco-sriov CNI
// plugin on each node. The credential Secret (a copy of spec.sriov.credentialSecretRef's, in
// that namespace) is the deliverer's to create.
package manifests

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/capx-io/capx/internal/capvco/ccm/config"
	"github.com/capx-io/capx/internal/capvco/sriov"
)

//go:embed sriov.yaml.tmpl
var tmpl string

// CredentialsDir is where the agent reads its credential.
const CredentialsDir = "/etc/capvco/sriov-credentials"

// Options are what differs between clusters.
type Options struct {
	// Image holds /capvco-sriov-agent and /capvco-sriov.
	Image string
	// CredentialsSecret is the Secret in sriov.Namespace with the SR-IOV credential.
	CredentialsSecret string
	// Cloudspaces are the cluster's cloudspace ids (status.cloudspaces).
	Cloudspaces []string
	// Networks are the external networks Pods may get NICs on; empty allows any.
	Networks []int
	// Platform is where the credential may send the agent (the deliverer's own endpoint
	// policy), passed as the agent's --allow-http and --allowed-hosts.
	Platform config.Platform
}

// Render returns the manifests as one multi-document YAML stream.
func Render(o Options) ([]byte, error) {
	if o.Image == "" {
		return nil, errors.New("manifests: the image is empty")
	}
	if msgs := validation.IsDNS1123Subdomain(o.CredentialsSecret); len(msgs) > 0 {
		return nil, fmt.Errorf("manifests: credential Secret name %q: %s", o.CredentialsSecret, strings.Join(msgs, "; "))
	}
	if len(o.Cloudspaces) == 0 {
		return nil, errors.New("manifests: no cloudspace: the agent finds its VM in the cluster's cloudspaces")
	}
	for _, cs := range o.Cloudspaces {
		if cs == "" || strings.ContainsAny(cs, " ,\n\"'") {
			return nil, fmt.Errorf("manifests: cloudspace id %q", cs)
		}
	}
	for _, n := range o.Networks {
		if n <= 0 {
			return nil, fmt.Errorf("manifests: external network id %d", n)
		}
	}
	t, err := template.New("sriov").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return nil, err
	}
	platform, err := config.PlatformArgs(o.Platform)
	if err != nil {
		return nil, fmt.Errorf("manifests: %w", err)
	}
	var b bytes.Buffer
	err = t.Execute(&b, map[string]any{"Namespace": sriov.Namespace, "PlatformArgs": platform, "Image": o.Image, "CredentialsSecret": o.CredentialsSecret,
		"CredentialsDir": CredentialsDir, "Socket": sriov.DefaultSocket, "SocketDir": filepath.Dir(sriov.DefaultSocket),
		"Cloudspaces": o.Cloudspaces, "Networks": o.Networks})
	return b.Bytes(), err
}
