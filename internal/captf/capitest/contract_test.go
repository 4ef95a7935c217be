package capitest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/testenv/mgrtest"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{ControllerManager: true, CAPI: true}, &env))
}

func modules(image string) (string, error) {
	for _, role := range []string{"machinepool", "machine", "cluster"} {
		if strings.Contains(image, "/"+role+":") {
			return filepath.Join(env.Root, "test", "modules", role), nil
		}
	}
	return "", os.ErrNotExist
}

// TestCAPIReadsTheContract: with CAPI's core controllers running, a Cluster whose infrastructure
// is a TerraformCluster gets the endpoint the module reported, and a Machine whose
// infrastructure is a TerraformMachine gets the provider ID the module reported. Nothing here
// sets an owner reference: CAPI's controllers do.
func TestCAPIReadsTheContract(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := besideCAPI(t)

	cluster := testenv.Cluster(ns, "prod", "TerraformCluster", "prod")
	cluster.Spec.ClusterNetwork.Services.CIDRBlocks = []string{"10.96.0.0/12"}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	tc := testenv.TerraformCluster(ns, "prod", "prod", "capx.test/modules/cluster:v1")
	tc.Spec.Variables = map[string]apiextensionsv1.JSON{"endpoint_host": {Raw: []byte(`"192.0.2.10"`)}}
	g.Expect(env.Client.Create(ctx, tc)).To(Succeed())

	g.Expect(env.Client.Create(ctx, testenv.BootstrapSecret(ns, "m0-bootstrap", "prod", "#cloud-config\n"))).To(Succeed())
	machine := testenv.Machine(ns, "m0", "prod", "TerraformMachine", "m0", "m0-bootstrap")
	machine.Spec.Version = "v1.36.3"
	g.Expect(env.Client.Create(ctx, machine)).To(Succeed())
	tm := testenv.TerraformMachine(ns, "m0", "prod", "capx.test/modules/machine:v1")
	g.Expect(env.Client.Create(ctx, tm)).To(Succeed())

	g.Eventually(func() (clusterv1.APIEndpoint, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)
		return cluster.Spec.ControlPlaneEndpoint, err
	}, 3*time.Minute, 250*time.Millisecond).Should(Equal(clusterv1.APIEndpoint{Host: "192.0.2.10", Port: 6443}),
		"the Cluster takes the module's endpoint from the TerraformCluster")
	g.Eventually(func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)
		return ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false), err
	}, time.Minute, 250*time.Millisecond).Should(BeTrue(), "CAPI sees the infrastructure provisioned")

	mgrtest.WaitFor(t, env, tm, 3*time.Minute, "provisioned", func(o *captfv1.TerraformMachine) bool {
		return ptr.Deref(o.Status.Initialization.Provisioned, false)
	})
	g.Eventually(func() (string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(machine), machine)
		return machine.Spec.ProviderID, err
	}, 2*time.Minute, 250*time.Millisecond).Should(Equal(tm.Spec.ProviderID), "the Machine takes its provider ID from the TerraformMachine")
	g.Expect(machine.Spec.ProviderID).To(HavePrefix("capx-test:///"))
}

// besideCAPI starts what every test here runs beside CAPI's core manager (the kubelet that runs
// the module Jobs, and the manager with CAPTF alone) and returns a namespace of the test's own;
// a failed test logs the end of CAPI's log and how many Pods ran.
func besideCAPI(t *testing.T) string {
	t.Helper()
	kubelet := env.StartKubelet(t, modules)
	mgrtest.Start(t, env, "--providers=captf", "--drift-interval=0")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("CAPI core manager log (tail):\n%s", tail(env.CAPILog(), 8000))
			t.Logf("pods: %d started", kubelet.Started())
		}
	})
	return env.NewNamespace(t)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
