package addons

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/capx-io/capx/internal/capvco/sriov"
	sriovmanifests "github.com/capx-io/capx/internal/capvco/sriov/manifests"
	"github.com/capx-io/capx/internal/vco"
)

// SRIOVCredentialsSecret is the Secret, in sriov.Namespace, the agent mounts.
const SRIOVCredentialsSecret = "capvco-sriov-credentials"

// SRIOVAgentDaemonSet is the agent's DaemonSet (namespace/name), whose status SRIOVAgentReady
// reports.
const SRIOVAgentDaemonSet = sriov.Namespace + "/capvco-sriov-agent"

// SRIOVAgent is capvco-sriov-agent and its CNI plugin, in clusters with spec.sriov.enabled: a
// DaemonSet on every worker in namespace whitesky-sriov-cni, holding a copy of
// spec.sriov.credentialSecretRef only (never the cluster's credential, under any name).
// Disabled, what an earlier pass applied is removed.
type SRIOVAgent struct{}

// Name implements Addon.
func (SRIOVAgent) Name() string { return "sriov-agent" }

// sriovKinds are the kinds the agent's manifests apply.
var sriovKinds = mustKinds(sriovObjects(sriovmanifests.Options{Image: "capvco-sriov-agent", CredentialsSecret: SRIOVCredentialsSecret, Cloudspaces: []string{"cloudspace"}}))

// Render implements Addon.
func (SRIOVAgent) Render(s Settings) (Rendered, error) {
	vc := s.VCOCluster
	spec := vc.Spec.SRIOV
	if spec == nil || !spec.Enabled {
		return Rendered{Skip: "spec.sriov.enabled is not set", Remove: sriovKinds}, nil
	}
	ref := spec.CredentialSecretRef
	switch {
	case ref == nil || ref.Name == "":
		return Rendered{}, errors.New("spec.sriov.enabled is set without spec.sriov.credentialSecretRef: the agent needs a credential of its own, scoped to this cluster's cloudspaces")
	case ref.Name == vc.Spec.CredentialsRef.Name:
		return Rendered{}, fmt.Errorf("spec.sriov.credentialSecretRef names the cluster's own credential %q, which would put customer-wide access on every worker: create a credential scoped to this cluster's cloudspaces", ref.Name)
	}
	var cloudspaces []string
	for _, site := range s.Sites() {
		if site.CloudspaceID == "" {
			return Rendered{}, fmt.Errorf("site %s has no cloudspace id in status yet: the agent looks its node's VM up in every cloudspace of the cluster", site.Name)
		}
		cloudspaces = append(cloudspaces, site.CloudspaceID)
	}
	objs, err := sriovObjects(sriovmanifests.Options{Image: s.Image("capvco-sriov-agent"), CredentialsSecret: SRIOVCredentialsSecret, Cloudspaces: cloudspaces,
		Platform: s.Platform})
	if err != nil {
		return Rendered{}, err
	}
	return Rendered{Objects: objs, Secrets: []SecretCopy{{
		Namespace: sriov.Namespace, Name: SRIOVCredentialsSecret, From: ref.Name, Field: "spec.sriov.credentialSecretRef",
		Keys: credentialKeys, Required: []string{vco.SecretKeyURL, vco.SecretKeyCustomer}, NotSameAs: vc.Spec.CredentialsRef.Name,
	}}}, nil
}

func sriovObjects(o sriovmanifests.Options) ([]*unstructured.Unstructured, error) {
	return renderedObjects(sriovmanifests.Render(o))
}
