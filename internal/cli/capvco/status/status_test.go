package status_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/cli/capvco/status"
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

// seed writes a geo cluster (primary adopted, second site created) with a load balancer that
// has one of two control-plane machines in its pool, DNS, and a GPU worker.
func seed(t *testing.T, ns string) {
	ctx := context.Background()
	c := env.Client
	// The Cluster API Cluster reports its own v1beta2 conditions: not Available (no workload
	// cluster to probe), whatever the VCOCluster's Ready says.
	cluster := testenv.Cluster(ns, "prod", "VCOCluster", "prod")
	must(t, c.Create(ctx, cluster))
	cluster.Status.Conditions = []metav1.Condition{
		{Type: clusterv1.ClusterAvailableCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotAvailableReason,
			Message: "* RemoteConnectionProbe: Remote connection not established yet", LastTransitionTime: metav1.Now()},
		{Type: clusterv1.ClusterInfrastructureReadyCondition, Status: metav1.ConditionTrue, Reason: clusterv1.ReadyReason, LastTransitionTime: metav1.Now()},
	}
	must(t, c.Status().Update(ctx, cluster))
	vc := testenv.VCOCluster(ns, "prod", "prod", "nl-rmd-dc01-001", "vco-credentials")
	vc.Spec.Geo = &capvcov1.GeoSpec{Sites: []capvcov1.GeoSite{{Name: "mac", Location: "be-mac-dc01-001", PrivateNetwork: "192.168.104.0/24"}}}
	vc.Spec.DNS = &capvcov1.DNSSpec{Name: "api.prod.example.com"}
	vc.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "api.prod.example.com", Port: 6443}
	must(t, c.Create(ctx, vc))
	vc.Status = capvcov1.VCOClusterStatus{
		Initialization: capvcov1.InitializationStatus{Provisioned: ptr.To(true)},
		Cloudspaces: []capvcov1.CloudspaceStatus{
			{Site: "primary", Location: "nl-rmd-dc01-001", ID: "cs-000001", Name: "capvco_" + ns + "_prod_primary", ExternalIP: "203.0.113.10", Adopted: true},
			{Site: "mac", Location: "be-mac-dc01-001", ID: "cs-000002", Name: "capvco_" + ns + "_prod_mac", ExternalIP: "198.51.100.10"},
		},
		LoadBalancer: &capvcov1.LoadBalancerStatus{ID: "lb-000003", ServerPoolID: "sp-000004", Address: "203.0.113.10:6443", Members: []string{"192.168.103.11"}},
		DNS:          &capvcov1.DNSStatus{Name: "api.prod.example.com", Published: true, TTLSeconds: 3600},
		Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()},
			{Type: "LoadBalancerReady", Status: metav1.ConditionTrue, Reason: "Provisioned", Message: "1 of 2 API servers healthy", LastTransitionTime: metav1.Now()},
		},
	}
	must(t, c.Status().Update(ctx, vc))
	for i, name := range []string{"prod-cp-a", "prod-cp-b", "prod-gpu-0"} {
		m := testenv.VCOMachine(ns, name, "prod", 7)
		must(t, c.Create(ctx, m))
		m.Status.VMID = ptr.To(int64(101 + i))
		m.Status.CloudspaceID = "cs-000001"
		m.Status.FailureDomain = "primary"
		m.Status.Addresses = []clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: []string{"192.168.103.11", "192.168.103.12", "192.168.103.13"}[i]}}
		m.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}
		if name == "prod-gpu-0" {
			m.Status.GPUs = []capvcov1.GPUStatus{{Name: "capvco_" + ns + "_prod_prod-gpu-0_gpu_0", ID: "vgpu-000009", ProfileID: "nvidia-a100-1g-10gb", Attached: true}}
			m.Status.Conditions[0] = metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "GPUsNotReady", LastTransitionTime: metav1.Now()}
		}
		must(t, c.Status().Update(ctx, m))
	}
	// Another cluster's machine in the namespace is not shown.
	must(t, c.Create(ctx, testenv.VCOMachine(ns, "other-0", "other", 7)))
}

func run(t *testing.T, ns string, args ...string) (string, cmdutil.ExitCode) {
	t.Helper()
	streams, _, out, errOut := cmdutil.TestIOStreams(false)
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	must(t, err)
	f := cmdutil.NewTestFactory(streams, "kubectl capvco", env.Config, c, nil, ns)
	root := cmdutil.NewRoot(f, "", "")
	root.AddCommand(status.NewCmd(f, nil))
	code := cmdutil.Execute(root, streams, append([]string{"status"}, args...))
	if errOut.Len() > 0 {
		t.Logf("stderr: %s", errOut)
	}
	return out.String(), code
}

func TestStatusTree(t *testing.T) {
	ns := "status-tree"
	must(t, env.Client.Create(context.Background(), testenv.Namespace(ns)))
	seed(t, ns)
	out, code := run(t, ns, "prod")
	if code != cmdutil.ExitOK {
		t.Fatalf("exit %d\n%s", code, out)
	}
	golden.Assert(t, filepath.Join("testdata", "status.golden"), []byte(out))

	js, code := run(t, ns, "prod", "-o", "json")
	if code != cmdutil.ExitOK {
		t.Fatalf("exit %d", code)
	}
	var got status.Status
	must(t, json.Unmarshal([]byte(js), &got))
	if len(got.Clusters) != 1 {
		t.Fatalf("%d clusters", len(got.Clusters))
	}
	cl := got.Clusters[0]
	if !cl.ClusterFound || cl.Available == nil || cl.Available.Status != "False" || cl.Ready.Status != "True" || len(cl.ClusterConditions) != 2 {
		t.Fatalf("the Cluster's Available and the VCOCluster's Ready: %+v", cl)
	}
	if len(cl.Machines) != 3 || !cl.Machines[0].InLBPool || cl.Machines[1].InLBPool || cl.LB.Members[0].Machine != "prod-cp-a" ||
		cl.Sites[0].Origin != "adopted" || cl.Sites[1].Origin != "created" || cl.DNS.TTLSeconds != 3600 || len(cl.Machines[2].GPUs) != 1 {
		t.Fatalf("status %+v", cl)
	}

	// The head line is the Cluster's readiness; the VCOCluster's own Ready has its own line.
	if !strings.HasPrefix(out, "Cluster status-tree/prod  Available=False (NotAvailable)\n├─ VCOCluster prod  Ready=True\n") {
		t.Fatalf("the tree does not tell the Cluster's Available from the VCOCluster's Ready:\n%s", out)
	}

	if _, code := run(t, ns, "nosuch"); code != cmdutil.ExitFailure {
		t.Fatalf("unknown cluster: exit %d", code)
	}
	if _, code := run(t, ns, "prod", "-A"); code != cmdutil.ExitUsage {
		t.Fatalf("CLUSTER with -A: exit %d", code)
	}
}
