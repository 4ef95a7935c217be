package captf_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	tfjson "github.com/hashicorp/terraform-json"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/planview"
	"github.com/capx-io/capx/internal/testenv"
)

// The benchmarks run the real binaries side by side, as a user would: each iteration times
// one run of kubectl-captf and one run of the tool it replaces, and reports both and their
// ratio (captf/other: below 1 means kubectl captf is faster).
//
//	go test ./internal/cli/captf -run XXX -bench . -benchtime 10x

// timeCmd runs a command to completion and returns how long it took. want is the exit code
// expected.
func timeCmd(b *testing.B, want int, dir string, env []string, name string, args ...string) time.Duration {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = io.Discard
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if code := exitCode(err); code != want {
		b.Fatalf("%s %v: exit %d (want %d): %v\n%s", name, args, code, want, err, stderr.String())
	}
	return d
}

func sideBySide(b *testing.B, captf, other func() time.Duration, otherName string) {
	var tc, to time.Duration
	b.ResetTimer()
	for range b.N {
		tc += captf()
		to += other()
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(tc.Milliseconds())/n, "captf-ms/op")
	b.ReportMetric(float64(to.Milliseconds())/n, otherName+"-ms/op")
	b.ReportMetric(float64(tc)/float64(to), "captf/"+otherName)
}

// savedPlan writes a module of n terraform_data resources, plans it into plan.bin with the
// real OpenTofu and returns the directory and the plan's show -json.
func savedPlan(b *testing.B, n int) (string, *tfjson.Plan) {
	b.Helper()
	dir := b.TempDir()
	module := fmt.Sprintf(`resource "terraform_data" "r" {
  count = %d
  input = {
    name = "r-${count.index}"
    size = "small"
    tags = { team = "a", index = count.index }
  }
}
`, n)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(module), 0o644); err != nil {
		b.Fatal(err)
	}
	tofu := filepath.Join(env.Root, "bin", "tofu")
	if err := os.WriteFile(filepath.Join(dir, "tofurc"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-input=false"}, {"plan", "-input=false", "-out=plan.bin"}} {
		cmd := exec.Command(tofu, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), tofuEnv(dir)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("tofu %v: %v\n%s", args, err, out)
		}
	}
	cmd := exec.Command(tofu, "show", "-json", "plan.bin")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), tofuEnv(dir)...)
	out, err := cmd.Output()
	if err != nil {
		b.Fatal(err)
	}
	p := &tfjson.Plan{}
	d := json.NewDecoder(bytes.NewReader(out))
	d.UseNumber()
	if err := d.Decode(p); err != nil {
		b.Fatal(err)
	}
	return dir, p
}

// tofuEnv keeps OpenTofu offline and quiet about a missing CLI configuration.
func tofuEnv(dir string) []string {
	return []string{"TF_CLI_CONFIG_FILE=" + filepath.Join(dir, "tofurc"), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1"}
}

func benchNamespace(b *testing.B) string {
	ns := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	return ns
}

// BenchmarkPlanShow5000: `kubectl captf plan show` of a 5,000-change plan (its view read from
// the TerraformPlanViews the manager publishes) against `tofu show` of the same saved plan.
func BenchmarkPlanShow5000(b *testing.B) {
	ctx := context.Background()
	dir, plan := savedPlan(b, 5000)
	ns := benchNamespace(b)
	tp := &captfv1.TerraformPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big-0123456789", Labels: map[string]string{captfv1.PlanPhaseLabel: string(captfv1.PlanPending)}},
		Spec: captfv1.TerraformPlanSpec{TargetRef: captfv1.PlanTarget{Kind: "TerraformCluster", Name: "big"}, PlanHash: "p2:00",
			InputsHash: "h2:00", Reason: captfv1.PlanReasonManual, Summary: captfv1.PlanSummary{Create: 5000}},
	}
	view := planview.FromPlan(plan, nil)
	if len(view.Changes) != 5000 {
		b.Fatalf("%d changes", len(view.Changes))
	}
	parts, digest, err := planview.Publish(view, tp.Name, ns, nil)
	if err != nil {
		b.Fatal(err)
	}
	tp.Spec.ViewDigest = digest
	if err := env.Client.Create(ctx, tp); err != nil {
		b.Fatal(err)
	}
	for _, part := range parts {
		if err := env.Client.Create(ctx, part); err != nil {
			b.Fatal(err)
		}
	}
	plugin := filepath.Join(pluginPath(b), "kubectl-captf")
	tofu := filepath.Join(env.Root, "bin", "tofu")
	sideBySide(b,
		func() time.Duration {
			return timeCmd(b, 1, dir, nil, plugin, "plan", "show", tp.Name, "-n", ns, "--kubeconfig", env.KubeconfigPath)
		},
		func() time.Duration { return timeCmd(b, 0, dir, tofuEnv(dir), tofu, "show", "-no-color", "plan.bin") },
		"tofu")
}

// BenchmarkStatus500: `kubectl captf status` of a cluster of 500 objects (a Cluster, its
// TerraformCluster, 249 Machines and their TerraformMachines) against `clusterctl describe
// cluster` of the same cluster.
func BenchmarkStatus500(b *testing.B) {
	ctx := context.Background()
	ns := benchNamespace(b)
	cl := testenv.Cluster(ns, "big", "TerraformCluster", "big")
	mustCreate(b, cl)
	tc := testenv.TerraformCluster(ns, "big", "big", clusterImage)
	mustCreate(b, tc)
	now := metav1.Now()
	for i := range 249 {
		name := fmt.Sprintf("big-md-%03d", i)
		m := testenv.Machine(ns, name, "big", "TerraformMachine", name, "boot-"+name)
		m.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "big", UID: cl.UID}}
		mustCreate(b, m)
		tm := testenv.TerraformMachine(ns, name, "big", "capx.test/modules/machine:v1")
		tm.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: name, UID: m.UID, Controller: ptr.To(true)}}
		mustCreate(b, tm)
		tm.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: now}}
		tm.Status.ObservedStateSerial = ptr.To[int64](3)
		if err := env.Client.Status().Update(ctx, tm); err != nil {
			b.Fatal(err)
		}
	}
	plugin := filepath.Join(pluginPath(b), "kubectl-captf")
	clusterctl := filepath.Join(env.Root, "bin", "clusterctl")
	noColor := []string{"NO_COLOR=1"}
	sideBySide(b,
		func() time.Duration {
			return timeCmd(b, 0, "", noColor, plugin, "status", "big", "-n", ns, "--kubeconfig", env.KubeconfigPath)
		},
		func() time.Duration {
			return timeCmd(b, 0, "", noColor, clusterctl, "describe", "cluster", "big", "-n", ns, "--kubeconfig", env.KubeconfigPath)
		},
		"clusterctl")
}

// BenchmarkVersionStartup: start-up of `kubectl captf version --client` (no cluster), and of
// `version` with an unreachable kubeconfig (it reports the manager as unknown).
func BenchmarkVersionStartup(b *testing.B) {
	plugin := filepath.Join(pluginPath(b), "kubectl-captf")
	missing := []string{"KUBECONFIG=" + filepath.Join(b.TempDir(), "none")}
	b.Run("client", func(b *testing.B) {
		for range b.N {
			timeCmd(b, 0, "", nil, plugin, "version", "--client")
		}
	})
	b.Run("no-cluster", func(b *testing.B) {
		for range b.N {
			timeCmd(b, 0, "", missing, plugin, "version")
		}
	})
}

func mustCreate(b *testing.B, objs ...client.Object) {
	b.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			b.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}
