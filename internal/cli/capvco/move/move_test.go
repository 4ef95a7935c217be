package move_test

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	capvcomove "github.com/capx-io/capx/internal/cli/capvco/move"
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
