package captf_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/cli/move"
	"github.com/capx-io/capx/internal/testenv"
)

// TestMovePreflightAndInventory: on a management cluster installed without clusterctl, the
// preflight names every precondition clusterctl move would fail on; register-inventory writes
// the inventory object exactly as clusterctl init does (idempotently, and not at all with
// --dry-run), after which the inventory checks pass. The target is the same API server.
func TestMovePreflightAndInventory(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t)
	// No inventory entry yet, whatever another test registered.
	_ = env.Client.Delete(ctx, &clusterctlv1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: "capx-system", Name: "infrastructure-capx"}})
	create(t, testenv.Cluster(ns, "c1", "TerraformCluster", "c1"))
	tc := testenv.TerraformCluster(ns, "c1", "c1", clusterImage)
	tc.Spec.CredentialsRef = &corev1.LocalObjectReference{Name: "cloud-creds"}
	tc.Annotations = map[string]string{clusterctlv1.BlockMoveAnnotation: ""}
	create(t, tc)

	preflight := func() (result, map[string]bool) {
		r := run(t, ns, runOpts{}, "move", "preflight", "c1", "--to-kubeconfig", env.KubeconfigPath, "-o", "json")
		var rep move.Report
		r.decode(t, &rep)
		passed := map[string]bool{}
		for _, c := range rep.Checks {
			passed[c.Name] = c.Passed
		}
		return r, passed
	}
	r, passed := preflight()
	g.Expect(r.code).To(Equal(cmdutil.ExitFound), r.String())
	g.Expect(passed).To(HaveKeyWithValue("cluster ready to move", false))
	g.Expect(passed).To(HaveKeyWithValue("cluster not paused", true))
	g.Expect(passed).To(HaveKeyWithValue("block-move clear", false))
	g.Expect(passed).To(HaveKeyWithValue("CRDs labelled on the source", true))
	g.Expect(passed).To(HaveKeyWithValue("no Job running", true))
	g.Expect(passed).To(HaveKeyWithValue("credential and variable sources on the target", false))
	g.Expect(passed).To(HaveKeyWithValue("inventory on the source", false))

	r = run(t, ns, runOpts{}, "move", "preflight", "c1", "--to-kubeconfig", env.KubeconfigPath)
	g.Expect(r.code).To(Equal(cmdutil.ExitFound))
	g.Expect(r.out).To(ContainSubstring("FAIL  inventory on the source"))
	g.Expect(r.out).To(ContainSubstring("run kubectl captf move register-inventory"))
	g.Expect(run(t, ns, runOpts{}, "move", "preflight", "c1").code).To(Equal(cmdutil.ExitUsage))

	// register-inventory: without a manager and without --version it cannot tell the version.
	r = run(t, ns, runOpts{}, "move", "register-inventory")
	g.Expect(r.code).To(Equal(cmdutil.ExitUsage), r.String())
	g.Expect(r.errOut).To(ContainSubstring("pass --version"))
	g.Expect(run(t, ns, runOpts{}, "move", "register-inventory", "--version", "latest").code).To(Equal(cmdutil.ExitUsage))

	r = run(t, ns, runOpts{}, "move", "register-inventory", "--version", "v0.1.0", "--dry-run")
	g.Expect(r.code).To(Equal(cmdutil.ExitOK), r.String())
	g.Expect(r.out).To(ContainSubstring("(dry run) create    Provider capx-system/infrastructure-capx"))
	var providers clusterctlv1.ProviderList
	if err := env.Client.List(ctx, &providers); err == nil {
		g.Expect(providers.Items).To(BeEmpty(), "a dry run writes nothing")
	}

	g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "capx-system"}}))).To(Succeed())
	r = run(t, ns, runOpts{}, "move", "register-inventory", "--version", "v0.1.0")
	g.Expect(r.code).To(Equal(cmdutil.ExitOK), r.String())
	got := &clusterctlv1.Provider{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: "capx-system", Name: "infrastructure-capx"}, got)).To(Succeed())
	want := move.Capx.InventoryObject("v0.1.0")
	g.Expect(got.Labels).To(Equal(want.Labels))
	g.Expect(got.ProviderName).To(Equal("capx"))
	g.Expect(got.Type).To(Equal("InfrastructureProvider"))
	g.Expect(got.Version).To(Equal("v0.1.0"))
	r = run(t, ns, runOpts{}, "move", "register-inventory", "--version", "v0.1.0")
	g.Expect(r.code).To(Equal(cmdutil.ExitOK), r.String())
	g.Expect(r.out).To(ContainSubstring("unchanged"))

	_, passed = preflight()
	g.Expect(passed).To(HaveKeyWithValue("inventory on the source", true))
	g.Expect(passed).To(HaveKeyWithValue("inventory on the target", true))
}
