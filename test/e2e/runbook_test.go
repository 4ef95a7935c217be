//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/test/e2e/install"
)

// TestCAPTFRunbook is an operator's runbook with kubectl captf on a real management cluster:
// the plugin binary runs against the cluster's kubeconfig, Jobs run in pods on the kubelet.
//
//  1. A provisioned cluster: status shows its tree, logs the apply Job's runner log.
//  2. A new network CIDR replaces the network: the apply waits as a destructive plan, plan show
//     shows the replace (exit 1), approve --hash --wait applies it.
//  3. backups restore --serial N --yes --wait brings back the first serial.
//  4. Stripped owner references of the backups: owners check finds them (exit 1), owners repair
//     --yes fixes them, owners check is clean (exit 0).
func TestCAPTFRunbook(t *testing.T) {
	const ns, name = "runbook", "rb"
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	m := mgmtA(t)
	collectOnFailure(t, "runbook", m)
	g := NewWithT(t)
	plugin := buildPlugin(t)
	captf := func(want int, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, plugin, append(args, "-n", ns, "--kubeconfig", m.Kubeconfig())...)
		cmd.Env = append(os.Environ(), "NO_COLOR=1")
		out, err := cmd.CombinedOutput()
		code := 0
		if e, ok := err.(*exec.ExitError); ok {
			code = e.ExitCode()
		} else if err != nil {
			t.Fatalf("kubectl captf %v: %v", args, err)
		}
		g.Expect(code).To(Equal(want), "kubectl captf %v:\n%s", args, out)
		return string(out)
	}

	step(t, "a provisioned cluster from the local template", func() {
		_, err := m.ApplyCluster(ctx, shared.kit.Repository, install.ClusterSpec{Name: name, Namespace: ns, Flavor: install.FlavorLocal, Workers: 1})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(m.WaitProvisioned(ctx, ns, name, 8*time.Minute)).To(Succeed())
	})
	// Deleting is TestCAPTFLifecycle's subject; here the Cluster is only asked to go, and the
	// management cluster is taken down after the suites.
	defer func() {
		cl := &clusterv1.Cluster{}
		cl.Namespace, cl.Name = ns, name
		if err := m.Client.Delete(context.Background(), cl); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete Cluster %s/%s: %v", ns, name, err)
		}
	}()

	tc := &captfv1.TerraformCluster{}
	step(t, "status and logs", func() {
		out := captf(0, "status", name)
		g.Expect(out).To(MatchRegexp(`TerraformCluster/` + name + `\s+True`))
		out = captf(0, "logs", "tfc/"+name)
		g.Expect(out).To(ContainSubstring("captf-runner:"))
		g.Expect(out).To(ContainSubstring("apply"))
	})

	var planName, hash string
	step(t, "a destructive change waits; plan show shows the replace", func() {
		g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tc)).To(Succeed())
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"variables":{"network_cidr":"10.9.0.0/16"}}}`))
		g.Expect(m.Client.Patch(ctx, tc, patch)).To(Succeed())
		eventually(t, 5*time.Minute, func(g Gomega) {
			g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(tc), tc)).To(Succeed())
			g.Expect(tc.Status.PendingPlanRef).NotTo(BeNil())
			g.Expect(tc.Status.ActiveJob).To(BeNil())
		}, "a pending plan")
		planName = tc.Status.PendingPlanRef.Name
		out := captf(1, "plan", "show", name)
		g.Expect(out).To(ContainSubstring("Replace (1)"))
		g.Expect(out).To(ContainSubstring("# forces replacement"))
		var view struct {
			PlanHash string `json:"planHash"`
		}
		g.Expect(json.Unmarshal([]byte(captf(1, "plan", "show", planName, "-o", "json")), &view)).To(Succeed())
		hash = view.PlanHash
	})

	step(t, "approve --hash --wait applies it", func() {
		out := captf(0, "approve", planName, "--hash", hash, "--wait", "--timeout", "8m")
		g.Expect(out).To(ContainSubstring("Applied"))
	})

	step(t, "backups restore --yes --wait", func() {
		var list struct {
			Backups []struct {
				Serial     int64 `json:"serial"`
				Restorable bool  `json:"restorable"`
			} `json:"backups"`
		}
		g.Expect(json.Unmarshal([]byte(captf(0, "backups", "list", name, "-o", "json")), &list)).To(Succeed())
		g.Expect(len(list.Backups)).To(BeNumerically(">=", 2))
		first := list.Backups[len(list.Backups)-1]
		g.Expect(first.Restorable).To(BeTrue())
		out := captf(0, "backups", "restore", name, "--serial", strconv.FormatInt(first.Serial, 10), "--yes", "--wait", "--timeout", "8m")
		g.Expect(out).To(ContainSubstring("Restored"))
	})

	step(t, "owners check finds stripped owner references; owners repair fixes them", func() {
		// The manager re-owns backups itself, but never while paused (clusterctl move pauses
		// the Cluster): that is when the owner references a restore or a move left broken are
		// the operator's to check and repair.
		cluster := &clusterv1.Cluster{}
		g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
		pause := client.MergeFrom(cluster.DeepCopy())
		cluster.Spec.Paused = ptr.To(true)
		g.Expect(m.Client.Patch(ctx, cluster, pause)).To(Succeed())
		eventually(t, time.Minute, func(g Gomega) {
			for _, list := range []client.ObjectList{&captfv1.TerraformClusterList{}, &captfv1.TerraformMachineList{}, &captfv1.TerraformMachinePoolList{}} {
				g.Expect(m.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
				g.Expect(meta.EachListItem(list, func(o runtime.Object) error {
					c, ok := o.(interface{ GetConditions() []metav1.Condition })
					g.Expect(ok).To(BeTrue())
					g.Expect(meta.IsStatusConditionTrue(c.GetConditions(), clusterv1.PausedCondition)).To(BeTrue(), "%T paused", o)
					return nil
				})).To(Succeed())
			}
		}, "every CAPTF object of the cluster paused")
		var secrets corev1.SecretList
		g.Expect(m.Client.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{captfv1.StateBackupLabel: "true"})).To(Succeed())
		g.Expect(secrets.Items).NotTo(BeEmpty())
		for i := range secrets.Items {
			s := &secrets.Items[i]
			p := client.MergeFrom(s.DeepCopy())
			s.OwnerReferences = nil
			g.Expect(m.Client.Patch(ctx, s, p)).To(Succeed())
		}
		out := captf(1, "owners", "check", name)
		g.Expect(strings.Count(out, "BROKEN")).To(BeNumerically(">=", len(secrets.Items)))
		captf(0, "owners", "repair", name, "--yes")
		captf(0, "owners", "check", name)
		g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
		unpause := client.MergeFrom(cluster.DeepCopy())
		cluster.Spec.Paused = nil
		g.Expect(m.Client.Patch(ctx, cluster, unpause)).To(Succeed())
	})
}

// buildPlugin builds kubectl-captf from this checkout.
func buildPlugin(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "kubectl-captf")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/kubectl-captf")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build kubectl-captf: %v\n%s", err, out)
	}
	return bin
}
