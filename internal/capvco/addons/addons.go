// Package addons delivers what every CAPVCO workload cluster runs besides Kubernetes itself: the
// cloud controller manager, and, where the cluster's spec asks for them, the CSI driver, the GPU
// add-on, the SR-IOV agent and external-dns with the whitesky.cloud webhook.
//
// An add-on is one value in a Registry: it renders, from the cluster's settings alone (no API
// call), the objects to apply in the workload cluster and the Secrets to copy there from the
// management cluster. Delivery does the rest for every add-on alike: it reads the workload
// cluster's kubeconfig from the Secret Cluster API writes (<cluster>-kubeconfig), copies the
// Secrets (only the keys the add-on names), applies the objects with server-side apply, deletes
// what an add-on no longer renders, and reads back whether the add-on's Deployments and
// DaemonSets are available. What it found is the caller's to record (VCOCluster
// status.addons and the AddonsReady condition); a hash of what was applied decides whether the
// next pass applies again. An add-on a cluster stopped asking for is removed when its Render
// says which kinds it applies (Rendered.Remove).
//
// Writing an add-on (docs/capvco/addons.md has the whole guide):
//
//	type myAddon struct{}
//
//	func (myAddon) Name() string { return "my-addon" }
//
//	func (myAddon) Render(s addons.Settings) (addons.Rendered, error) {
//		if s.VCOCluster.Spec.Addons.MyAddon == nil {
//			return addons.Rendered{Skip: "spec.addons.myAddon is not set"}, nil
//		}
//		stream, err := mymanifests.Render(mymanifests.Options{Image: s.Image("capvco-my-addon"), ...})
//		...
//		return addons.Rendered{Objects: objs, Secrets: []addons.SecretCopy{...}}, nil
//	}
//
// and add it to Default. Render must be deterministic: the same settings give the same objects,
// or the add-on is applied on every pass.
package addons

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/manifest"
	"github.com/capx-io/capx/internal/vco"
)

// Addon is one component the manager installs into the workload clusters that want it.
type Addon interface {
	// Name is the add-on's name in status.addons and AddonsReady: a DNS label, stable across
	// versions (it labels the add-on's objects, which is how what it no longer renders is found).
	Name() string
	// Render returns what the add-on puts into one workload cluster, from the settings alone.
	// A cluster that does not want the add-on gets Rendered{Skip: why}; an error says what in
	// the cluster's spec is wrong (it is shown in AddonsReady as it is).
	Render(s Settings) (Rendered, error)
}

// Registry is the add-ons, in the order they are applied.
type Registry []Addon

// Default is every add-on the manager delivers.
var Default = Registry{CloudControllerManager{}, CSIDriver{}, GPU{}, SRIOVAgent{}, ExternalDNS{}}

// DefaultImageRepository is where the release names the project's images.
const DefaultImageRepository = "ghcr.io/capx-io"

// projectComponents are the project's images the add-ons run.
var projectComponents = []string{"capvco-cloud-controller-manager", "capvco-csi-driver", "capvco-external-dns-webhook", "capvco-sriov-agent"}

// Components are the names whose image the manager's --capvco-addon-image overrides: the
// project's, then the third parties' in name order.
func Components() []string {
	var third []string
	for name := range csiSidecars {
		third = append(third, name)
	}
	third = append(third, devicePluginComponent, externalDNSComponent)
	slices.Sort(third)
	return slices.Concat(projectComponents, third)
}

// Settings are what an add-on renders from: one cluster's, and the manager's.
type Settings struct {
	// VCOCluster is the cluster's infrastructure (spec and status: the sites' cloudspaces).
	VCOCluster *capvcov1.VCOCluster
	// ClusterName is the CAPI Cluster's name; with the namespace it names the cluster's
	// platform objects.
	ClusterName string
	// Version is the manager's version. The project's images are tagged with it, so upgrading
	// the manager upgrades every add-on in place.
	Version string
	// ImageRepository is where the project's images are (<repository>/<component>:<version>).
	ImageRepository string
	// Images overrides the image of a component (key: the component's name, e.g.
	// capvco-cloud-controller-manager or csi-provisioner).
	Images map[string]string
	// Platform is the manager's endpoint policy (--vco-allow-http, --vco-allowed-hosts), for
	// the add-ons' configs: they reach the platform exactly as the manager does.
	Platform Platform
	// ControlPlaneReplicas is how many control-plane machines the cluster wants, as Cluster API
	// reports it (the Cluster's status.controlPlane.desiredReplicas; 0 while it has not said).
	// Delivery fills it in.
	ControlPlaneReplicas int32
}

// Platform is the manager's endpoint policy, given to every add-on as it is.
type Platform = vco.PlatformConfig

// Image is the image of one of the project's components: the override, else
// <repository>/<component>:<version>.
func (s Settings) Image(component string) string {
	if img := s.Images[component]; img != "" {
		return img
	}
	return fmt.Sprintf("%s/%s:%s", s.ImageRepository, component, s.Version)
}

// ThirdPartyImage is the image of a component the project does not build: the override, else
// the given default.
func (s Settings) ThirdPartyImage(component, def string) string {
	if img := s.Images[component]; img != "" {
		return img
	}
	return def
}

// Sites are the cluster's sites, the primary one first, with the cloudspace ids status
// recorded.
func (s Settings) Sites() []Site {
	var out []Site
	for _, site := range decide.Sites(s.VCOCluster.Spec) {
		id := ""
		for _, c := range s.VCOCluster.Status.Cloudspaces {
			if c.Site == site.Name {
				id = c.ID
			}
		}
		out = append(out, Site{Name: site.Name, Location: site.Location, CloudspaceID: id})
	}
	return out
}

// Site is one site of the cluster and its cloudspace.
type Site struct{ Name, Location, CloudspaceID string }

// Rendered is what an add-on puts into a workload cluster.
type Rendered struct {
	// Skip says why the cluster does not want the add-on ("" when it does). Objects and Secrets
	// are then empty; what an earlier pass applied stays, unless Remove names its kinds.
	Skip string
	// Remove, with Skip, are the kinds of objects the add-on applies when it is wanted: what of
	// them carries the add-on's label, and the Secrets copied for it, are deleted from a
	// workload cluster it was delivered to. Empty keeps what was applied (the CSI driver: a
	// storage driver under running volumes is the cluster admin's to delete).
	Remove []schema.GroupVersionKind
	// Objects are applied in order, with server-side apply.
	Objects []*unstructured.Unstructured
	// Secrets are copied from the management cluster before the objects are applied.
	Secrets []SecretCopy
}

// SecretCopy is a Secret the add-on needs in the workload cluster, copied from one in the
// VCOCluster's namespace. Only Keys are copied: a Secret with more in it (an allowHTTP key, a
// note) does not leak it.
type SecretCopy struct {
	// Namespace and Name of the Secret in the workload cluster.
	Namespace, Name string
	// From is the Secret in the VCOCluster's namespace, and Field the spec field that names it
	// (for messages).
	From, Field string
	// Keys are copied when present; Required ones must be.
	Keys, Required []string
	// NotSameAs names a Secret in the VCOCluster's namespace whose credential this one must not
	// be (the same token, or client id and secret): the SR-IOV agent's credential lands on every
	// worker, so the cluster's own is refused there under any name.
	NotSameAs string
}

// renderedObjects reads an add-on's rendered manifests (what its Render returned) as objects.
func renderedObjects(stream []byte, err error) ([]*unstructured.Unstructured, error) {
	if err != nil {
		return nil, err
	}
	objs, err := manifest.Objects(stream)
	if err != nil {
		return nil, fmt.Errorf("the rendered manifests: %w", err)
	}
	return objs, nil
}
