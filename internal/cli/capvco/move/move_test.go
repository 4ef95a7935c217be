package move_test

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	capvcomove "github.com/capx-io/capx/internal/cli/capvco/move"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/cli/move"
	"github.com/capx-io/capx/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, testenv.Options{}, &env)) }

// TestCredentialSecretsOnTarget: clusterctl move does not carry the Secrets a VCOCluster names;
// the preflight fails naming each one missing on the target, and passes once they are there.
// (The target here is the same API server in another role: the check only reads it.)
func TestCredentialSecretsOnTarget(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t)
	vc := testenv.VCOCluster(ns, "c1", "c1", "nl-rmd-dc01-001", "vco-credentials")
	vc.Spec.SRIOV = &capvcov1.SRIOVSpec{Enabled: true, CredentialSecretRef: &corev1.LocalObjectReference{Name: "sriov-credentials"}}
	if err := env.Client.Create(ctx, vc); err != nil {
		t.Fatal(err)
	}
	other := testenv.VCOCluster(ns, "c2", "c2", "nl-rmd-dc01-001", "not-this-one")
	if err := env.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	target := move.Target{Namespace: ns, Name: "c1"}

	checks := capvcomove.Checks(ctx, env.Client, env.Client, target)
	if len(checks) != 1 || checks[0].Passed || !strings.Contains(checks[0].Message, ns+"/sriov-credentials") ||
		!strings.Contains(checks[0].Message, ns+"/vco-credentials") || strings.Contains(checks[0].Message, "not-this-one") {
		t.Fatalf("checks %+v", checks)
	}
	for _, name := range []string{"vco-credentials", "sriov-credentials"} {
		if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	checks = capvcomove.Checks(ctx, env.Client, env.Client, target)
	if len(checks) != 1 || !checks[0].Passed || checks[0].Message != "2 present" {
		t.Fatalf("checks %+v", checks)
	}
}

// TestPreflightThroughThePlugin: `kubectl capvco move preflight` runs the shared checks with
// CAPVCO's CRDs and block-move kinds, and CAPVCO's credential check, one line each.
func TestPreflightThroughThePlugin(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t)
	if err := env.Client.Create(ctx, testenv.Cluster(ns, "c1", "VCOCluster", "c1")); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, testenv.VCOCluster(ns, "c1", "c1", "nl-rmd-dc01-001", "vco-credentials")); err != nil {
		t.Fatal(err)
	}
	streams, _, out, errOut := cmdutil.TestIOStreams(false)
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	f := cmdutil.NewTestFactory(streams, "kubectl capvco", env.Config, c, nil, ns)
	root := cmdutil.NewRoot(f, "", "")
	root.AddCommand(capvcomove.NewCmd(f))
	code := cmdutil.Execute(root, streams, []string{"move", "preflight", "c1", "--to-kubeconfig", env.KubeconfigPath})
	if code != cmdutil.ExitFound {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"FAIL  credential Secrets on the target missing: " + ns + "/vco-credentials",
		"PASS  CRDs labelled on the source  4 CRDs carry clusterctl.cluster.x-k8s.io",
		"PASS  block-move clear",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
