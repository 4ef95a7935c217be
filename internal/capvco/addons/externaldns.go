package addons

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	ednsmanifests "github.com/capx-io/capx/internal/capvco/externaldns/manifests"
	"github.com/capx-io/capx/internal/vco"
)

// externalDNSComponent names external-dns's image for --capvco-addon-image.
const externalDNSComponent = "external-dns"

// ExternalDNSCredentialsSecret is the Secret, in the add-on's namespace, the webhook mounts.
const ExternalDNSCredentialsSecret = "capvco-external-dns-credentials"

// ExternalDNS is external-dns with capvco-external-dns-webhook beside it, in clusters that set
// spec.addons.externalDNS. Unset, what an earlier pass applied is removed (the DNS records
// external-dns made stay on the platform: deleting them is the annotated objects' to ask).
type ExternalDNS struct{}

// Name implements Addon.
func (ExternalDNS) Name() string { return "external-dns" }

// externalDNSKinds are the kinds the add-on applies.
var externalDNSKinds = mustKinds(externalDNSObjects(ednsmanifests.Options{WebhookImage: "capvco-external-dns-webhook",
	CredentialsSecret: ExternalDNSCredentialsSecret, Cloudspaces: []string{"cloudspace"}, OwnerID: "owner"}))

// Render implements Addon: the manifests with the cluster's cloudspaces, spec.addons.externalDNS's
// domains and sources, an owner id of the cluster's own (namespace and name, so clusters sharing
// a customer's DNS never take each other's records), and a copy of the credential
// (credentialsSecretRef, else the cluster's).
func (ExternalDNS) Render(s Settings) (Rendered, error) {
	vc := s.VCOCluster
	spec := vc.Spec.Addons.ExternalDNS
	if spec == nil {
		return Rendered{Skip: "spec.addons.externalDNS is not set", Remove: externalDNSKinds}, nil
	}
	from, field := vc.Spec.CredentialsRef.Name, "spec.credentialsRef"
	if ref := spec.CredentialsSecretRef; ref != nil {
		from, field = ref.Name, "spec.addons.externalDNS.credentialsSecretRef"
	}
	var cloudspaces []string
	for _, site := range s.Sites() {
		if site.CloudspaceID == "" {
			return Rendered{}, fmt.Errorf("site %s has no cloudspace id in status yet: the webhook puts A records on the cluster's cloudspaces", site.Name)
		}
		cloudspaces = append(cloudspaces, site.CloudspaceID)
	}
	objs, err := externalDNSObjects(ednsmanifests.Options{
		Image: s.ThirdPartyImage(externalDNSComponent, ednsmanifests.DefaultImage), WebhookImage: s.Image("capvco-external-dns-webhook"),
		CredentialsSecret: ExternalDNSCredentialsSecret, Cloudspaces: cloudspaces,
		DomainFilters: spec.DomainFilters, ExcludeDomains: spec.ExcludeDomains, Sources: spec.Sources,
		OwnerID:  fmt.Sprintf("capvco-%s-%s", vc.Namespace, s.ClusterName),
		Platform: s.Platform,
	})
	if err != nil {
		return Rendered{}, err
	}
	return Rendered{Objects: objs, Secrets: []SecretCopy{{
		Namespace: ednsmanifests.Namespace, Name: ExternalDNSCredentialsSecret, From: from, Field: field,
		Keys: credentialKeys, Required: []string{vco.SecretKeyURL, vco.SecretKeyCustomer},
	}}}, nil
}

func externalDNSObjects(o ednsmanifests.Options) ([]*unstructured.Unstructured, error) {
	return renderedObjects(ednsmanifests.Render(o))
}
