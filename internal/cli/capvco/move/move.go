// Package move is `kubectl capvco move`: the shared preflight and inventory registration of
// internal/cli/move, plus CAPVCO's own check that every Secret a VCOCluster names exists on the
// target. Those Secrets belong to no cluster object, so clusterctl move leaves them behind, and a
// moved VCOCluster without its credential cannot reach whitesky.cloud.
package move

import (
	"context"
	"slices"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/cli/move"
)

// CRDs are CAPVCO's CRDs, which clusterctl move must find labelled on both sides.
var CRDs = []string{
	"vcoclusters.infrastructure.cluster.x-k8s.io",
	"vcomachines.infrastructure.cluster.x-k8s.io",
	"vcoclustertemplates.infrastructure.cluster.x-k8s.io",
	"vcomachinetemplates.infrastructure.cluster.x-k8s.io",
}

// Provider is the capx provider with CAPVCO's CRDs.
func Provider() move.Provider {
	p := move.Capx
	p.CRDs = CRDs
	return p
}

// NewCmd is `kubectl capvco move`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	return move.NewCmd(f, Provider(), Extension)
}

// Extension is what CAPVCO adds to the shared move commands.
var Extension = move.Extension{
	BlockMoveLists: []client.ObjectList{&capvcov1.VCOClusterList{}, &capvcov1.VCOMachineList{}},
	Preflight:      Checks,
}

// Checks are CAPVCO's preflight checks: the credential Secrets of the cluster's VCOClusters
// are on the target.
func Checks(ctx context.Context, src, dst client.Client, t move.Target) []move.Check {
	var list capvcov1.VCOClusterList
	if err := src.List(ctx, &list, client.InNamespace(t.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: t.Name}); err != nil {
		return []move.Check{{Name: "credential Secrets on the target", Message: "list the cluster's VCOClusters on the source: " + err.Error()}}
	}
	if t.Cluster != nil && t.Cluster.Spec.InfrastructureRef.Name != "" {
		var vc capvcov1.VCOCluster
		if err := src.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Cluster.Spec.InfrastructureRef.Name}, &vc); err == nil &&
			!slices.ContainsFunc(list.Items, func(o capvcov1.VCOCluster) bool { return o.Name == vc.Name }) {
			list.Items = append(list.Items, vc)
		}
	}
	if len(list.Items) == 0 {
		return nil
	}
	var secrets []client.Object
	for _, name := range SecretNames(list.Items) {
		secrets = append(secrets, &corev1.Secret{ObjectMeta: metaOf(t.Namespace, name)})
	}
	return []move.Check{move.CheckPresent(ctx, dst, "credential Secrets", secrets...)}
}

// SecretNames are the Secrets the VCOClusters name: the cluster credential and the optional
// SR-IOV, image-publishing and certificate-store credentials.
func SecretNames(vcs []capvcov1.VCOCluster) []string {
	var names []string
	add := func(n string) {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, vc := range vcs {
		add(vc.Spec.CredentialsRef.Name)
		if s := vc.Spec.SRIOV; s != nil && s.CredentialSecretRef != nil {
			add(s.CredentialSecretRef.Name)
		}
		if g := vc.Spec.Geo; g != nil && g.ImagePublishCredentialSecretRef != nil {
			add(g.ImagePublishCredentialSecretRef.Name)
		}
		if r := vc.Spec.Registry; r != nil && r.CertCredentialSecretRef != nil {
			add(r.CertCredentialSecretRef.Name)
		}
	}
	slices.Sort(names)
	return names
}

func metaOf(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}
