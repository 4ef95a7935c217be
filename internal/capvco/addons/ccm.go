package addons

import (
	ccmconfig "github.com/capx-io/capx/internal/capvco/ccm/config"
	ccmmanifests "github.com/capx-io/capx/internal/capvco/ccm/manifests"
	"github.com/capx-io/capx/internal/vco"
)

// CCMCredentialsSecret is the kube-system Secret the cloud controller manager mounts.
const CCMCredentialsSecret = "capvco-cloud-controller-manager-credentials"

// credentialKeys are the keys of a credential Secret an add-on gets (never allowHTTP: where a
// credential may go is the manager's to say, and the add-on's config carries it). caBundle goes
// along: the add-on reaches the same API, behind the same private CA, as the manager.
var credentialKeys = []string{vco.SecretKeyURL, vco.SecretKeyCustomer, vco.SecretKeyJWT, vco.SecretKeyClientID,
	vco.SecretKeyClientSecret, vco.SecretKeyIAMURL, vco.SecretKeyCABundle}

// CloudControllerManager is capvco-cloud-controller-manager, in every cluster: the kubelets run
// with cloud-provider external, so without it no Node is initialised and no Machine gets its
// Node.
type CloudControllerManager struct{}

// Name implements Addon.
func (CloudControllerManager) Name() string { return "cloud-controller-manager" }

// Render implements Addon: the manifests of internal/capvco/ccm/manifests with the cluster's
// sites, its load-balancer health interval and the manager's endpoint policy, and a copy of the
// credential (spec.addons.cloudControllerManager.credentialsSecretRef, else the cluster's).
func (CloudControllerManager) Render(s Settings) (Rendered, error) {
	vc := s.VCOCluster
	from, field := vc.Spec.CredentialsRef.Name, "spec.credentialsRef"
	if ref := vc.Spec.Addons.CloudControllerManager.CredentialsSecretRef; ref != nil {
		from, field = ref.Name, "spec.addons.cloudControllerManager.credentialsSecretRef"
	}
	var sites []ccmconfig.Site
	for _, site := range s.Sites() {
		sites = append(sites, ccmconfig.Site{Name: site.Name, Location: site.Location, CloudspaceID: site.CloudspaceID})
	}
	lb := ccmconfig.LoadBalancer{}
	if sec := vc.Spec.ControlPlaneLoadBalancer.HealthCheckIntervalSeconds; sec > 0 {
		lb.HealthCheckIntervalSeconds = int(sec)
	}
	stream, err := ccmmanifests.Render(ccmmanifests.Options{
		Image: s.Image("capvco-cloud-controller-manager"), CredentialsSecret: CCMCredentialsSecret,
		Cluster: ccmconfig.Cluster{Namespace: vc.Namespace, Name: s.ClusterName}, Sites: sites, LoadBalancer: lb,
		Platform: s.Platform,
		Replicas: ccmReplicas(s.ControlPlaneReplicas),
	})
	objs, err := renderedObjects(stream, err)
	if err != nil {
		return Rendered{}, err
	}
	return Rendered{Objects: objs, Secrets: []SecretCopy{{
		Namespace: "kube-system", Name: CCMCredentialsSecret, From: from, Field: field,
		Keys: credentialKeys, Required: []string{vco.SecretKeyURL, vco.SecretKeyCustomer},
	}}}, nil
}

// ccmReplicas is two (one leads, the other waits) on a cluster with two control-plane machines
// or more, one on a cluster with a single control plane: the Pods run on the host network, one
// to a control-plane node (the Deployment's anti-affinity), so a second replica there would
// stay unscheduled and the add-on would never be available. Not known yet (0): two.
func ccmReplicas(controlPlane int32) int {
	if controlPlane == 1 {
		return 1
	}
	return 2
}
