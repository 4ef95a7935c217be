package captf_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/cli/captf"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	climove "github.com/capx-io/capx/internal/cli/move"
	"github.com/capx-io/capx/internal/testenv"
)

// TestClusterctlMoveAfterRegisterInventory: the real `clusterctl move` from a management cluster
// whose inventory lists capx to one installed from plain manifests fails ("provider ... not
// found in the target cluster"); after `move register-inventory` on the target, the same
// `clusterctl move` moves the cluster. The source's entry is written by register-inventory too,
// on an API server without the inventory CRD, which it installs from clusterctl's own manifest.
// Source and target are two API servers.
func TestClusterctlMoveAfterRegisterInventory(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "moving"
	src := moveSource(t, ns)

	// CAPI's CRDs labelled for clusterctl (its kustomize configuration does that), no inventory
	// CRD on the source yet.
	labelForClusterctl(t, src.Client, "clusters.cluster.x-k8s.io", "cluster-api")
	g.Expect(src.Client.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: climove.InventoryCRD}})).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(src.Client.Get(ctx, client.ObjectKey{Name: climove.InventoryCRD}, &apiextensionsv1.CustomResourceDefinition{}))
	}).Should(BeTrue())
	// The target: labelled too, and no capx inventory entry (another test may have written one).
	labelForClusterctl(t, env.Client, "clusters.cluster.x-k8s.io", "cluster-api")
	_ = env.Client.Delete(ctx, &clusterctlv1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: "capx-system", Name: "infrastructure-capx"}})

	tc := provisionedOn(t, src, ns, "c1", func(*captfv1.TerraformCluster) {})
	state := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tfstate-default-0123456789abcdef-c",
		Labels:          map[string]string{clusterctlv1.ClusterctlMoveLabel: ""},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: captfv1.GroupVersion.String(), Kind: "TerraformCluster", Name: "c1", UID: tc.UID}}},
		Data: map[string][]byte{"tfstate": []byte("state")}}
	g.Expect(src.Client.Create(ctx, state)).To(Succeed())

	// The source's entry, as clusterctl init would have written it.
	r := runIn(t, src, ns, "move", "register-inventory", "--version", "v0.1.0")
	g.Expect(r.code).To(Equal(cmdutil.ExitOK), r.String())
	g.Expect(r.out).To(ContainSubstring("create    CustomResourceDefinition providers.clusterctl.cluster.x-k8s.io"))
	g.Expect(r.out).To(ContainSubstring("create    Provider capx-system/infrastructure-capx"))
	out, err := clusterctlMove(src, ns)
	g.Expect(err).To(HaveOccurred(), "clusterctl move with the target lacking the provider:\n%s", out)
	g.Expect(out).To(ContainSubstring("provider infrastructure-capx not found in the target cluster"))

	r = runIn(t, env, ns, "move", "register-inventory", "--version", "v0.1.0")
	g.Expect(r.code).To(Equal(cmdutil.ExitOK), r.String())
	out, err = clusterctlMove(src, ns)
	g.Expect(err).NotTo(HaveOccurred(), "clusterctl move:\n%s", out)

	// Moved: the objects are on the target and gone from the source.
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c1"}, &captfv1.TerraformCluster{})).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(state), &corev1.Secret{})).To(Succeed())
	g.Expect(apierrors.IsNotFound(src.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c1"}, &captfv1.TerraformCluster{}))).To(BeTrue())
}

// moveSource starts the source API server of a move test and makes the namespace and
// capx-system on it and on the target (env).
func moveSource(t *testing.T, ns string) *testenv.Env {
	t.Helper()
	src, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Stop() })
	for _, c := range []client.Client{src.Client, env.Client} {
		for _, name := range []string{ns, "capx-system"} {
			if err := client.IgnoreAlreadyExists(c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})); err != nil {
				t.Fatal(err)
			}
		}
	}
	return src
}

// provisionedOn creates on src a Cluster whose infrastructure is provisioned and control plane
// initialised (what clusterctl move checks first) and its TerraformCluster, both called name;
// edit changes the TerraformCluster before it is created.
func provisionedOn(t *testing.T, src *testenv.Env, ns, name string, edit func(*captfv1.TerraformCluster)) *captfv1.TerraformCluster {
	t.Helper()
	ctx := context.Background()
	cl := testenv.Cluster(ns, name, "TerraformCluster", name)
	if err := src.Client.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	cl.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	cl.Status.Conditions = []metav1.Condition{{Type: clusterv1.ClusterControlPlaneInitializedCondition, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.Now()}}
	if err := src.Client.Status().Update(ctx, cl); err != nil {
		t.Fatal(err)
	}
	tc := testenv.TerraformCluster(ns, name, name, clusterImage)
	tc.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: name, UID: cl.UID, Controller: ptr.To(true)}}
	edit(tc)
	if err := src.Client.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	return tc
}

// labelForClusterctl gives a CRD the labels clusterctl init stamps on every component.
func labelForClusterctl(t *testing.T, c client.Client, name, provider string) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	p := client.MergeFrom(crd.DeepCopy())
	if crd.Labels == nil {
		crd.Labels = map[string]string{}
	}
	crd.Labels[clusterctlv1.ClusterctlLabel] = ""
	crd.Labels[clusterv1.ProviderNameLabel] = provider
	if err := c.Patch(context.Background(), crd, p); err != nil {
		t.Fatal(err)
	}
}

func clusterctlMove(src *testenv.Env, ns string) (string, error) {
	cmd := exec.Command(filepath.Join(env.Root, "bin", "clusterctl"), "move", "--kubeconfig", src.KubeconfigPath,
		"--to-kubeconfig", env.KubeconfigPath, "--namespace", ns, "-v", "1")
	// No version check against GitHub: nothing leaves the machine.
	cmd.Env = append(os.Environ(), "CLUSTERCTL_DISABLE_VERSIONCHECK=true", "XDG_CONFIG_HOME="+filepath.Join(os.TempDir(), "capx-clusterctl-test"))
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// runIn runs `kubectl captf args...` against another environment.
func runIn(t *testing.T, e *testenv.Env, ns string, args ...string) result {
	t.Helper()
	c, err := client.NewWithWatch(e.Config, client.Options{Scheme: e.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	streams, _, out, errOut := cmdutil.TestIOStreams(false)
	f := cmdutil.NewTestFactory(streams, captf.Name, e.Config, c, cs, ns)
	code := cmdutil.Execute(captf.NewRoot(f), streams, args)
	return result{code: code, out: out.String(), errOut: errOut.String()}
}
