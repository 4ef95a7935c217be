//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
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
	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/test/e2e/install"
	"github.com/capx-io/capx/test/e2e/quickstart"
	"github.com/capx-io/capx/test/runbook"
)

// TestRunbooks runs the runbooks of docs/runbooks on what the quickstart sets up (its simulator,
// forwarded to the host, and its samples demo and vco-demo in namespace quickstart, by the
// quickstart's own code), every command as written, with the tools an operator has: the real
// kubectl finding kubectl-captf and kubectl-capvco on PATH, and capvco-gpucheck. Each runbook
// starts from the situation it is for, which the suite creates first: a plan waiting for
// approval, backups without owner references under a paused Cluster, an orphaned vGPU
// reservation. A command that does not end as its runbook says (exit 0, or its "# exit N")
// fails the suite. The move runbook needs two management clusters: TestClusterctlMove runs it.
func TestRunbooks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	m := mgmtA(t)
	k := shared.kit
	collectOnFailure(t, "runbooks", m)
	g := NewWithT(t)
	tools := runbookTools(t)
	ns := quickstart.Namespace

	var sim *quickstart.Simulator
	step(t, "the quickstart's simulator and samples", func() {
		var err error
		sim, err = quickstart.DeploySimulator(ctx, m, k, ns, func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) })
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(quickstart.Samples(ctx, m, k, ns)).To(Succeed())
	})
	// Deleting is TestCAPTFLifecycle's subject: demo is only asked to go. vco-demo is gone
	// before the next suite redeploys the simulator, whose state it needs to be torn down.
	defer func() {
		ctx := context.Background()
		for _, name := range []string{quickstart.VCOSample, quickstart.CAPTFSample} {
			cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			if err := m.Client.Delete(ctx, cl); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete Cluster %s/%s: %v", ns, name, err)
			}
		}
		eventually(t, 3*time.Minute, func(g Gomega) {
			err := m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: quickstart.VCOSample}, &capvcov1.VCOCluster{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "VCOCluster %s: %v", quickstart.VCOSample, err)
		}, "the CAPVCO sample torn down")
	}()

	tc := &captfv1.TerraformCluster{}
	key := client.ObjectKey{Namespace: ns, Name: quickstart.CAPTFSample}

	t.Run("approve-a-plan", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(m.Client.Get(ctx, key, tc)).To(Succeed())
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"variables":{"network_cidr":"10.9.0.0/16"}}}`))
		g.Expect(m.Client.Patch(ctx, tc, patch)).To(Succeed())
		eventually(t, 5*time.Minute, func(g Gomega) {
			g.Expect(m.Client.Get(ctx, key, tc)).To(Succeed())
			g.Expect(tc.Status.PendingPlanRef).NotTo(BeNil())
			g.Expect(tc.Status.ActiveJob).To(BeNil())
		}, "a plan waiting for approval")
		planName := tc.Status.PendingPlanRef.Name

		runRunbook(t, m, tools, "approve-a-plan.md", nil, nil)

		plan := &captfv1.TerraformPlan{}
		g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: planName}, plan)).To(Succeed())
		g.Expect(plan.Labels[captfv1.PlanPhaseLabel]).To(Equal(string(captfv1.PlanApplied)), "the runbook applied the plan")
	})

	t.Run("restore-a-backup", func(t *testing.T) {
		g := NewWithT(t)
		var secrets corev1.SecretList
		runRunbook(t, m, tools, "restore-a-backup.md", nil, map[string]func(){
			// The dry run checks that no Job runs: one that does is waited for.
			"2. Check, then restore": func() {
				eventually(t, 5*time.Minute, func(g Gomega) {
					g.Expect(m.Client.Get(ctx, key, tc)).To(Succeed())
					g.Expect(tc.Status.ActiveJob).To(BeNil())
				}, "no Job running")
			},
			// As the section says: the Cluster paused, the backups' owner references gone.
			"After restoring the management cluster from an external backup": func() {
				pauseCluster(t, ctx, m, ns, quickstart.CAPTFSample, true)
				g.Expect(m.Client.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{captfv1.StateBackupLabel: "true"})).To(Succeed())
				g.Expect(secrets.Items).NotTo(BeEmpty())
				for i := range secrets.Items {
					s := &secrets.Items[i]
					p := client.MergeFrom(s.DeepCopy())
					s.OwnerReferences = nil
					g.Expect(m.Client.Patch(ctx, s, p)).To(Succeed())
				}
			},
		})
		g.Expect(m.Client.Get(ctx, key, tc)).To(Succeed())
		g.Expect(tc.Status.LastRestoredSerial).NotTo(BeNil(), "the runbook restored a serial")
		cluster := &clusterv1.Cluster{}
		g.Expect(m.Client.Get(ctx, key, cluster)).To(Succeed())
		g.Expect(ptr.Deref(cluster.Spec.Paused, false)).To(BeFalse(), "the runbook unpaused the Cluster")
		for i := range secrets.Items {
			s := &corev1.Secret{}
			g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(&secrets.Items[i]), s)).To(Succeed())
			g.Expect(s.OwnerReferences).NotTo(BeEmpty(), "backup %s re-owned", s.Name)
		}
	})

	t.Run("gpu-orphans", func(t *testing.T) {
		g := NewWithT(t)
		creds := sim.Credentials.StringData
		platform, err := vco.New(vco.Credentials{URL: strings.Replace(creds["url"], sim.URL, sim.HostURL, 1), Customer: creds["customer"], JWT: creds["jwt"]}, vco.Options{})
		g.Expect(err).NotTo(HaveOccurred())
		vc := &capvcov1.VCOCluster{}
		g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: quickstart.VCOSample}, vc)).To(Succeed())
		location := vc.Spec.Location
		var orphan string
		runRunbook(t, m, tools, "gpu-orphans.md", nil, map[string]func(){
			// A reservation left by a machine whose VCOMachine vanished without a teardown.
			"1. Find them": func() {
				profiles, err := platform.ListGPUProfiles(ctx, location)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(profiles).NotTo(BeEmpty())
				orphan, err = platform.ReserveVGPU(ctx, location, profiles[0].ID, "capvco_"+ns+"_"+quickstart.VCOSample+"_gone-0_gpu_0")
				g.Expect(err).NotTo(HaveOccurred())
			},
		})
		left, err := platform.ListAllVGPUs(ctx, location, vco.ListVGPUsOptions{IncludeDeleted: true})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(left).NotTo(ContainElement(HaveField("ID", orphan)), "the runbook released the orphan for good")
		g.Expect(left).NotTo(BeEmpty(), "the GPU worker's reservation stays")
	})
}

// pauseCluster sets the Cluster's spec.paused and waits until every CAPTF object of it says so.
func pauseCluster(t *testing.T, ctx context.Context, m *install.Management, ns, name string, paused bool) {
	g := NewWithT(t)
	cluster := &clusterv1.Cluster{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Paused = ptr.To(paused)
	g.Expect(m.Client.Patch(ctx, cluster, patch)).To(Succeed())
	eventually(t, time.Minute, func(g Gomega) {
		for _, list := range []client.ObjectList{&captfv1.TerraformClusterList{}, &captfv1.TerraformMachineList{}, &captfv1.TerraformMachinePoolList{}} {
			g.Expect(m.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
			g.Expect(meta.EachListItem(list, func(o runtime.Object) error {
				c, ok := o.(interface{ GetConditions() []metav1.Condition })
				g.Expect(ok).To(BeTrue())
				g.Expect(meta.IsStatusConditionTrue(c.GetConditions(), clusterv1.PausedCondition)).To(Equal(paused), "%T Paused", o)
				return nil
			})).To(Succeed())
		}
	}, fmt.Sprintf("every CAPTF object of the cluster Paused=%v", paused))
}

// runbookBin is the runbooks' PATH folder, built once per run.
var runbookBin struct {
	once sync.Once
	dir  string
	err  error
}

// runbookTools builds the operator's tools from this checkout into a folder for the runbooks'
// PATH (kubectl-captf, kubectl-capvco, capvco-gpucheck) and links the toolchain's kubectl and
// clusterctl next to them, once per run (the folder goes with the run's artifacts).
func runbookTools(t *testing.T) string {
	t.Helper()
	runbookBin.once.Do(func() { runbookBin.dir, runbookBin.err = buildRunbookTools() })
	if runbookBin.err != nil {
		t.Fatal(runbookBin.err)
	}
	return runbookBin.dir
}

func buildRunbookTools() (string, error) {
	dir := artifactsDir("runbooks", "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	start := time.Now()
	// The images' flags (static, -trimpath), so that the packages the manager's image compiled
	// are reused.
	cmd := exec.Command("go", "build", "-trimpath", "-o", dir+string(filepath.Separator), "./cmd/kubectl-captf", "./cmd/kubectl-capvco", "./cmd/capvco-gpucheck")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the runbooks' tools: %v\n%s", err, out)
	}
	p := install.DefaultPaths(root)
	for name, target := range map[string]string{"kubectl": p.Kubectl(), "clusterctl": p.Clusterctl()} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			return "", err
		}
	}
	record("build the runbooks' tools", time.Since(start))
	return dir, nil
}

// runRunbook runs docs/runbooks/<name> against m: every command of its sh blocks, section by
// section, in one bash from the repository's root, with tools on PATH, m's kubeconfig in
// KUBECONFIG, and the placeholders replaced by mapping (nil: the runbook's own quickstart
// names). before[heading] runs before that section: the situation the section starts from.
// Every command's output goes to _artifacts/e2e/runbooks/<name>.log.
func runRunbook(t *testing.T, m *install.Management, tools, name string, mapping map[string]string, before map[string]func()) {
	t.Helper()
	r, err := runbook.Read(filepath.Join(root, "docs", "runbooks", name))
	if err != nil {
		t.Fatal(err)
	}
	if mapping == nil {
		mapping = r.Quickstart
		if len(mapping) == 0 && strings.Contains(strings.Join(commandTexts(r), "\n"), "my-cluster") {
			t.Fatalf("%s names my-cluster but says nothing of what it is on the quickstart", name)
		}
	}
	headings := map[string]bool{}
	for _, s := range r.Sections {
		headings[s.Heading] = true
	}
	var unknown []string
	for h := range before {
		if !headings[h] {
			unknown = append(unknown, h)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Fatalf("%s has no section %q: the suite sets up a situation for a section that is gone", name, unknown)
	}
	if err := os.MkdirAll(artifactsDir("runbooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := artifactsDir("runbooks", strings.TrimSuffix(name, ".md")+".log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	home := t.TempDir()
	sh, err := runbook.StartShell(root, []string{
		"PATH=" + tools + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"KUBECONFIG=" + m.Kubeconfig(), "HOME=" + home, "NO_COLOR=1", "CLUSTERCTL_DISABLE_VERSIONCHECK=true",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	for _, s := range r.Sections {
		if f := before[s.Heading]; f != nil {
			f()
		}
		if len(s.Commands) == 0 {
			continue
		}
		step(t, name+": "+s.Heading, func() {
			steps, err := runbook.RunSection(sh, s, mapping, 10*time.Minute, log)
			if err != nil {
				t.Fatalf("%s, %s: a command did not end as the runbook says (log: %s):\n%s", name, s.Heading, logPath, steps[len(steps)-1])
			}
		})
	}
}

func commandTexts(r *runbook.Runbook) []string {
	var out []string
	for _, c := range r.Commands() {
		out = append(out, c.Text)
	}
	return out
}
