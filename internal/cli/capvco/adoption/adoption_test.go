package adoption_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/cli/capvco/adoption"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/testenv/golden"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, testenv.Options{}, &env)) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, ns string, args ...string) (string, cmdutil.ExitCode) {
	t.Helper()
	streams, _, out, errOut := cmdutil.TestIOStreams(false)
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	must(t, err)
	f := cmdutil.NewTestFactory(streams, "kubectl capvco", env.Config, c, nil, ns)
	root := cmdutil.NewRoot(f, "", "")
	root.AddCommand(adoption.NewCmd(f, nil))
	code := cmdutil.Execute(root, streams, append([]string{"adoption"}, args...))
	return out.String() + errOut.String(), code
}

// TestAdoption: a cloudspace adopted while it ran VMs (the event), two VCOClusters of one
// cluster name in a namespace (a GitOps mis-render), and a second management cluster with the
// same cluster, each reported as an incident; a clean cluster exits 0.
func TestAdoption(t *testing.T) {
	ctx := context.Background()
	const ns = "adopt"
	must(t, env.Client.Create(ctx, testenv.Namespace(ns)))
	a := testenv.VCOCluster(ns, "shop-a", "shop", "nl-rmd-dc01-001", "creds")
	must(t, env.Client.Create(ctx, a))
	a.Status.Cloudspaces = []capvcov1.CloudspaceStatus{{Site: "primary", Location: "nl-rmd-dc01-001", ID: "cs-000007", Name: "capvco_adopt_shop_primary", Adopted: true}}
	must(t, env.Client.Status().Update(ctx, a))
	must(t, env.Client.Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: "shop-a.adopted"},
		InvolvedObject: corev1.ObjectReference{Kind: "VCOCluster", Namespace: ns, Name: "shop-a", APIVersion: capvcov1.GroupVersion.String(), UID: a.UID},
		Reason:         capvcov1.AdoptedLiveCloudspaceEvent, Type: corev1.EventTypeWarning, Count: 2,
		Message:        "Adopted cloudspace capvco_adopt_shop_primary (cs-000007) of site primary by name, and it already runs 3 VMs: if this is not a move of this cluster, another VCOCluster or management cluster manages the same infrastructure, and deleting either destroys it",
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(),
	}))
	must(t, env.Client.Create(ctx, testenv.VCOCluster(ns, "shop-b", "shop", "nl-rmd-dc01-001", "creds")))
	calm := testenv.VCOCluster(ns, "calm", "calm", "nl-rmd-dc01-001", "creds")
	must(t, env.Client.Create(ctx, calm))
	calm.Status.Cloudspaces = []capvcov1.CloudspaceStatus{{Site: "primary", Location: "nl-rmd-dc01-001", ID: "cs-000009", Name: "capvco_adopt_calm_primary"}}
	must(t, env.Client.Status().Update(ctx, calm))

	out, code := run(t, ns, "calm")
	if code != cmdutil.ExitOK || !strings.Contains(out, "No adoption incidents.") || !strings.Contains(out, "created") {
		t.Fatalf("calm: exit %d\n%s", code, out)
	}

	out, code = run(t, ns, "shop")
	if code != cmdutil.ExitFound {
		t.Fatalf("shop: exit %d", code)
	}
	golden.Assert(t, filepath.Join("testdata", "adoption-shop.golden"), []byte(out))
	out, code = run(t, ns, "shop", "-o", "json")
	if code != cmdutil.ExitFound {
		t.Fatalf("shop: exit %d\n%s", code, out)
	}
	var rep adoption.Report
	must(t, json.Unmarshal([]byte(out), &rep))
	types := map[string]int{}
	for _, in := range rep.Incidents {
		types[in.Type]++
	}
	if types[adoption.AdoptedLive] != 1 || types[adoption.Shared] != 1 || len(rep.Sites) != 2 || !rep.Sites[0].LiveAtAdoption || rep.Sites[0].Origin != "adopted" {
		t.Fatalf("report %+v", rep)
	}
	if !strings.Contains(rep.Incidents[1].Message, "cloudspace capvco_adopt_shop_primary in nl-rmd-dc01-001 is mapped by VCOCluster adopt/shop-a (site primary) and by VCOCluster adopt/shop-b") {
		t.Fatalf("shared: %s", rep.Incidents[1].Message)
	}

	// A second management cluster runs the same cluster calm.
	other, err := testenv.Start(testenv.Options{})
	must(t, err)
	defer func() { _ = other.Stop() }()
	must(t, other.Client.Create(ctx, testenv.Namespace(ns)))
	must(t, other.Client.Create(ctx, testenv.VCOCluster(ns, "calm", "calm", "nl-rmd-dc01-001", "creds")))
	out, code = run(t, ns, "calm", "--compare-kubeconfig", other.KubeconfigPath)
	if code != cmdutil.ExitFound || !strings.Contains(out, "SharedCloudspace: cloudspace capvco_adopt_calm_primary in nl-rmd-dc01-001 is mapped by VCOCluster adopt/calm (site primary) and by VCOCluster adopt/calm in "+other.KubeconfigPath) {
		t.Fatalf("compare: exit %d\n%s", code, out)
	}
}
