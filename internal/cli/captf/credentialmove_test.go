package captf_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/decide"
	"github.com/capx-io/capx/internal/captf/movelabel"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	climove "github.com/capx-io/capx/internal/cli/move"
)

// TestCredentialsMoveWithClusterctl (issue 23 item 3): the real clusterctl move carries the
// credentials Secret the manager labelled (decide.CredentialMoveOf over what reads it, as the
// manager's labelCredentials phase does: TestCredentialsMoveWithTheCluster proves the manager
// sets it) and deletes it from the source, and leaves behind a Secret a Pod of the source also
// reads. `kubectl captf move preflight` names that Secret and why (text and -o json, exit 1)
// until a copy is on the target, and fails while the manager's label sits on a Secret something
// that stays behind reads. Source and target are two API servers.
func TestCredentialsMoveWithClusterctl(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "moving-credentials"
	src := moveSource(t, ns)
	for _, c := range []client.Client{src.Client, env.Client} {
		labelForClusterctl(t, c, "clusters.cluster.x-k8s.io", "cluster-api")
	}
	provisionedOn(t, src, ns, "c2", func(tc *captfv1.TerraformCluster) {
		tc.Spec.CredentialsRef = &corev1.LocalObjectReference{Name: "cloud"}
		tc.Spec.Defaults = &captfv1.WorkspaceDefaults{CredentialsRef: &corev1.LocalObjectReference{Name: "shared"}}
	})
	for _, name := range []string{"cloud", "shared"} {
		g.Expect(src.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"TOKEN": "t0ken-" + name}})).To(Succeed())
	}
	// Something that is not CAPTF's, and never moves, reads "shared".
	g.Expect(client.IgnoreAlreadyExists(src.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}))).To(Succeed())
	g.Expect(src.Client.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "capx.test/web:v1",
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}}}}},
	})).To(Succeed())

	// The manager's decision for each Secret, carried out as labelCredentials does.
	label := func(name string, set bool) {
		t.Helper()
		s := &corev1.Secret{}
		g.Expect(src.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
		before := s.DeepCopy()
		if set {
			s.Labels = map[string]string{clusterctlv1.ClusterctlMoveLabel: ""}
			s.Annotations = map[string]string{decide.MoveLabelSetAnnotation: "true"}
		} else {
			delete(s.Labels, clusterctlv1.ClusterctlMoveLabel)
			delete(s.Annotations, decide.MoveLabelSetAnnotation)
		}
		g.Expect(src.Client.Patch(ctx, s, client.MergeFrom(before))).To(Succeed())
	}
	decision := func(name string) decide.CredentialMove {
		t.Helper()
		s := &corev1.Secret{}
		g.Expect(src.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
		uses, err := movelabel.Uses(ctx, src.Client, src.Client, ns, name, false)
		g.Expect(err).NotTo(HaveOccurred())
		return decide.CredentialMoveOf(movelabel.Input(s, uses))
	}
	g.Expect(decision("cloud")).To(Equal(decide.CredentialMove{Action: decide.MoveLabelSet, Moves: true}))
	g.Expect(decision("shared")).To(Equal(decide.CredentialMove{Reason: "read by what stays behind: Pod/web"}))
	label("cloud", true)

	g.Expect(runIn(t, src, ns, "move", "register-inventory", "--version", "v0.1.0").code).To(Equal(cmdutil.ExitOK))
	g.Expect(runIn(t, env, ns, "move", "register-inventory", "--version", "v0.1.0").code).To(Equal(cmdutil.ExitOK))

	const sources = "credential and variable sources on the target"
	preflight := func() (result, climove.Check) {
		t.Helper()
		r := runIn(t, src, ns, "move", "preflight", "c2", "--to-kubeconfig", env.KubeconfigPath, "-o", "json")
		var rep climove.Report
		r.decode(t, &rep)
		for _, c := range rep.Checks {
			if c.Name == sources {
				return r, c
			}
		}
		t.Fatalf("no check %q:\n%s", sources, r)
		return r, climove.Check{}
	}
	r, c := preflight()
	g.Expect(r.code).To(Equal(cmdutil.ExitFound), r.String())
	g.Expect(c.Passed).To(BeFalse())
	g.Expect(c.LeftBehind).To(Equal([]climove.LeftBehind{{Kind: "Secret", Name: "shared", Reason: "read by what stays behind: Pod/web"}}),
		"cloud moves; shared is left behind and not on the target")
	text := runIn(t, src, ns, "move", "preflight", "c2", "--to-kubeconfig", env.KubeconfigPath)
	g.Expect(text.code).To(Equal(cmdutil.ExitFound))
	g.Expect(text.out).To(ContainSubstring("FAIL  " + sources))
	g.Expect(text.out).To(ContainSubstring("Secret shared (read by what stays behind: Pod/web)"))

	// The manager's label on "shared" (set before the Pod came, say) would take it from the Pod.
	label("shared", true)
	_, c = preflight()
	g.Expect(c.Passed).To(BeFalse())
	g.Expect(c.Message).To(ContainSubstring("move would take from what stays behind: Secret shared (read by what stays behind: Pod/web)"))
	label("shared", false)

	// A copy on the target: the check passes, still naming what stays behind.
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"}, StringData: map[string]string{"TOKEN": "t0ken-shared"}})).To(Succeed())
	_, c = preflight()
	g.Expect(c.Passed).To(BeTrue(), c.Message)
	g.Expect(c.LeftBehind).To(Equal([]climove.LeftBehind{{Kind: "Secret", Name: "shared", Reason: "read by what stays behind: Pod/web", OnTarget: true}}))
	g.Expect(c.Message).To(Equal("1 move with the cluster; left behind, present on the target: Secret shared (read by what stays behind: Pod/web)"))

	out, err := clusterctlMove(src, ns)
	g.Expect(err).NotTo(HaveOccurred(), "clusterctl move:\n%s", out)
	moved := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cloud"}, moved)).To(Succeed(), "the labelled credentials moved")
	g.Expect(string(moved.Data["TOKEN"])).To(Equal("t0ken-cloud"))
	g.Expect(apierrors.IsNotFound(src.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cloud"}, &corev1.Secret{}))).To(BeTrue(), "and are gone from the source")
	g.Expect(src.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shared"}, &corev1.Secret{})).To(Succeed(), "the Pod's Secret stays")
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c2"}, &captfv1.TerraformCluster{})).To(Succeed())
	g.Expect(strings.Contains(out, "Error")).To(BeFalse(), out)
}
