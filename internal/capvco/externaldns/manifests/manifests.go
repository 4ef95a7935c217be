// Package manifests renders the ExternalDNS add-on of a workload cluster: external-dns
// (--provider=webhook) and capvco-external-dns-webhook in one Pod of a Deployment in namespace
// capvco-external-dns, and the read-only permissions external-dns needs. The credential Secret
// (a copy in that namespace) is the deliverer's to create.
package manifests

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/capx-io/capx/internal/capvco/ccm/config"
	"github.com/capx-io/capx/internal/capvco/externaldns"
)

//go:embed externaldns.yaml.tmpl
var tmpl string

// Namespace is where the add-on runs.
const Namespace = "capvco-external-dns"

// DefaultImage is the external-dns release the webhook is tested with (test/externaldns).
const DefaultImage = "registry.k8s.io/external-dns/external-dns:v0.20.0"

// CredentialsDir is where the webhook reads its credential.
const CredentialsDir = "/etc/capvco/credentials"

// Timeout bounds one webhook call of external-dns: a change set of up to 16 writes in each of
// its phases (4 in flight, about 30 s each) is answered within it. A larger change set's call
// times out, external-dns plans again, and the webhook does only what is still missing.
const Timeout = 10 * time.Minute

// Interval is external-dns's loop: longer than a typical change set.
const Interval = 5 * time.Minute

// Sources external-dns may read hostnames from.
var Sources = []string{"service", "ingress"}

// Options are what differs between clusters.
type Options struct {
	// Image is external-dns's (default DefaultImage); WebhookImage the webhook's.
	Image, WebhookImage string
	// CredentialsSecret is the Secret in Namespace with the webhook's credential.
	CredentialsSecret string
	// Cloudspaces are the cluster's cloudspace ids.
	Cloudspaces []string
	// DomainFilters and ExcludeDomains are given to both containers.
	DomainFilters, ExcludeDomains []string
	// Sources default to Sources.
	Sources []string
	// OwnerID marks the records this cluster's external-dns owns (its TXT registry).
	OwnerID string
	// Platform is where the credential may send the webhook (the deliverer's own endpoint
	// policy), passed as the webhook's --allow-http and --allowed-hosts.
	Platform config.Platform
}

// Render returns the manifests as one multi-document YAML stream.
func Render(o Options) ([]byte, error) {
	if o.Image == "" {
		o.Image = DefaultImage
	}
	if len(o.Sources) == 0 {
		o.Sources = Sources
	}
	if err := check(o); err != nil {
		return nil, fmt.Errorf("manifests: %w", err)
	}
	t, err := template.New("externaldns").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return nil, err
	}
	platform, err := config.PlatformArgs(o.Platform)
	if err != nil {
		return nil, fmt.Errorf("manifests: %w", err)
	}
	var b bytes.Buffer
	err = t.Execute(&b, map[string]any{"Namespace": Namespace, "PlatformArgs": platform, "Image": o.Image, "WebhookImage": o.WebhookImage,
		"CredentialsSecret": o.CredentialsSecret, "CredentialsDir": CredentialsDir, "Listen": externaldns.DefaultListen,
		"Timeout": Timeout.String(), "Interval": Interval.String(), "OwnerID": o.OwnerID, "Sources": o.Sources,
		"Cloudspaces": o.Cloudspaces, "DomainFilters": o.DomainFilters, "ExcludeDomains": o.ExcludeDomains})
	return b.Bytes(), err
}

// check refuses what would not make a working Pod: every value lands in an argument list.
func check(o Options) error {
	var errs []error
	if o.WebhookImage == "" {
		errs = append(errs, errors.New("the webhook image is empty"))
	}
	if msgs := validation.IsDNS1123Subdomain(o.CredentialsSecret); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("credential Secret name %q: %s", o.CredentialsSecret, strings.Join(msgs, "; ")))
	}
	if len(o.Cloudspaces) == 0 {
		errs = append(errs, errors.New("no cloudspace: the webhook puts A records on the cluster's cloudspaces"))
	}
	if o.OwnerID == "" || strings.ContainsAny(o.OwnerID, " ,\"'\n=") {
		errs = append(errs, fmt.Errorf("owner id %q", o.OwnerID))
	}
	for _, v := range slices.Concat(o.Cloudspaces, o.DomainFilters, o.ExcludeDomains) {
		if v == "" || strings.ContainsAny(v, " ,\"'\n") {
			errs = append(errs, fmt.Errorf("value %q", v))
		}
	}
	for _, s := range o.Sources {
		if !slices.Contains(Sources, s) {
			errs = append(errs, fmt.Errorf("source %q: external-dns is given service and ingress only", s))
		}
	}
	return errors.Join(errs...)
}
