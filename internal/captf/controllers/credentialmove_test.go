package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/decide"
	"github.com/capx-io/capx/internal/testenv"
)

// TestCredentialsMoveWithTheCluster (issue 23 item 3): the credentials Secret of a
// TerraformCluster on its Cluster's owner chain gets clusterctl's move label; once a
// TerraformCluster outside any Cluster (which clusterctl move leaves behind) names the same
// Secret, the label the manager set comes off at the next reconcile; a label a person set is
// never touched.
func TestCredentialsMoveWithTheCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t)
	startManagerIn(t, ns)

	cloud := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloud"}, StringData: map[string]string{"TOKEN": "t0ken-value"}}
	mine := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine", Labels: map[string]string{clusterctlv1.ClusterctlMoveLabel: "yes"}}, StringData: map[string]string{"TOKEN": "t0ken-value"}}
	create(t, cloud, mine)
	cluster := testenv.Cluster(ns, "prod", "TerraformCluster", "prod")
	create(t, cluster)
	tc := testenv.TerraformCluster(ns, "prod", "prod", clusterImage)
	tc.Spec.CredentialsRef = &corev1.LocalObjectReference{Name: "cloud"}
	ownedBy(tc, cluster, "Cluster")
	create(t, tc)

	moveLabel := func(name string) func() (map[string]string, error) {
		return func() (map[string]string, error) {
			s := &corev1.Secret{}
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)
			return map[string]string{
				"label":  s.Labels[clusterctlv1.ClusterctlMoveLabel] + map[bool]string{true: "(set)", false: "(unset)"}[hasKey(s.Labels, clusterctlv1.ClusterctlMoveLabel)],
				"marker": s.Annotations[decide.MoveLabelSetAnnotation],
			}, err
		}
	}
	g.Eventually(moveLabel("cloud"), 2*time.Minute, 250*time.Millisecond).Should(Equal(map[string]string{"label": "(set)", "marker": "true"}),
		"read only by a TerraformCluster that moves with its Cluster, the Secret is labelled for clusterctl move")

	// A TerraformCluster with no Cluster names the same Secret: clusterctl move would leave it
	// behind without its credentials.
	orphan := testenv.TerraformCluster(ns, "orphan", "", clusterImage)
	orphan.Spec.CredentialsRef = &corev1.LocalObjectReference{Name: "cloud"}
	create(t, orphan)
	// The next reconcile of prod (any change to it brings one) takes the label off.
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tc), tc); err != nil {
			return err
		}
		before := tc.DeepCopy()
		tc.Spec.CredentialsRef = &corev1.LocalObjectReference{Name: "cloud"}
		if tc.Annotations == nil {
			tc.Annotations = map[string]string{}
		}
		tc.Annotations["test.capx.io/poke"] = "1"
		return env.Client.Patch(ctx, tc, client.MergeFrom(before))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Eventually(moveLabel("cloud"), 2*time.Minute, 250*time.Millisecond).Should(Equal(map[string]string{"label": "(unset)", "marker": ""}),
		"shared with an object that stays behind, the manager's label comes off")

	// A label a person set is theirs: left as it is, without the manager's marker.
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tc), tc); err != nil {
			return err
		}
		before := tc.DeepCopy()
		tc.Spec.CredentialsRef = &corev1.LocalObjectReference{Name: "mine"}
		return env.Client.Patch(ctx, tc, client.MergeFrom(before))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	waitFor(t, tc, 2*time.Minute, "reconciled with the new credentials", func(o *captfv1.TerraformCluster) bool {
		return o.Status.ObservedGeneration == o.Generation
	})
	g.Consistently(moveLabel("mine"), 3*time.Second, 250*time.Millisecond).Should(Equal(map[string]string{"label": "yes(set)", "marker": ""}))
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}
