// Package manifests renders what runs capvco-cloud-controller-manager in a workload cluster:
// its ServiceAccount, RBAC, cloud-config ConfigMap and a Deployment pinned to control-plane
// nodes that mounts the credential Secret. A delivery mechanism applies the result; the
// credential Secret itself (a copy of the cluster's) is the deliverer's to create.
package manifests

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/capx-io/capx/internal/capvco/ccm/config"
)

//go:embed ccm.yaml.tmpl
var tmpl string

// CredentialsDir is where the Deployment mounts the credential Secret.
const CredentialsDir = "/etc/capvco/credentials"

// Options are what differs between clusters.
type Options struct {
	// Image is the capvco-cloud-controller-manager image.
	Image string
	// CredentialsSecret is the kube-system Secret holding the credential (url, customer, and
	// jwt or clientID + clientSecret + iamURL).
	CredentialsSecret string
	// Cluster and Sites name the CAPVCO cluster (config.Config's fields).
	Cluster      config.Cluster
	Sites        []config.Site
	LoadBalancer config.LoadBalancer
	// Platform is where the credential may send the CCM (the deliverer's own endpoint policy).
	Platform config.Platform
	// Replicas defaults to 2: one leads, the other waits on another control-plane node.
	Replicas int
}

// Render returns the manifests as one multi-document YAML stream.
func Render(o Options) ([]byte, error) {
	if o.Image == "" {
		return nil, errors.New("manifests: the image is empty")
	}
	if msgs := validation.IsDNS1123Subdomain(o.CredentialsSecret); len(msgs) > 0 {
		return nil, fmt.Errorf("manifests: credential Secret name %q: %s", o.CredentialsSecret, strings.Join(msgs, "; "))
	}
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	cfg := config.Config{CredentialsDir: CredentialsDir, Cluster: o.Cluster, Sites: o.Sites, LoadBalancer: o.LoadBalancer, Platform: o.Platform}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("manifests: cloud-config: %w", err)
	}
	cc, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	t, err := template.New("ccm").Option("missingkey=error").Funcs(template.FuncMap{
		"indent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
		},
	}).Parse(tmpl)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err = t.Execute(&b, map[string]any{"Image": o.Image, "CredentialsSecret": o.CredentialsSecret, "CredentialsDir": CredentialsDir,
		"CloudConfig": string(cc), "Replicas": o.Replicas})
	return b.Bytes(), err
}
