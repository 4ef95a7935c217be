package controllers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/testenv/mgrtest"
)

// The module of tenant A: when destroyed it tries, as its runner, to read, list, rewrite and
// delete tenant B's copied state, take B's state lock, plant a Secret and read the Events in B's
// destroy namespace, writes what it got to $REPORT, and lists what it can see in its own destroy
// namespace.
const hostileModule = `
resource "terraform_data" "hostile" {
  provisioner "local-exec" {
    when        = destroy
    interpreter = ["/bin/sh", "-c"]
    command     = <<-EOT
      k() { "$KUBECTL" --request-timeout=20s "$@"; }
      try() { name=$1; shift; out=$(k "$@" 2>&1); rc=$?; echo "$name $rc $(echo "$out" | head -n 1)" >> "$REPORT"; }
      k get secrets,configmaps,leases -o name > "$REPORT.own" 2>&1 || echo "own listing failed" >> "$REPORT"
      try list get secrets -n "$VICTIM_NS"
      try read get secret "$VICTIM_STATE" -n "$VICTIM_NS" -o yaml
      try rewrite patch secret "$VICTIM_STATE" -n "$VICTIM_NS" --type merge -p '{"data":{"tfstate":"aGFja2Vk"}}'
      try delete delete secret "$VICTIM_STATE" -n "$VICTIM_NS" --wait=false
      try lock patch lease "$VICTIM_LOCK" -n "$VICTIM_NS" --type merge -p '{"spec":{"holderIdentity":"hostile"}}'
      try plant create secret generic planted -n "$VICTIM_NS" --from-literal=a=b
      try events get events -n "$VICTIM_NS"
      echo done >> "$REPORT"
    EOT
  }
}
`

// The module of tenant B: its destroy waits for $GATE, so its copy and its copied state exist
// while A's module tries to reach them.
const gatedModule = `
resource "terraform_data" "gate" {
  provisioner "local-exec" {
    when        = destroy
    interpreter = ["/bin/sh", "-c"]
    command     = "while [ ! -e \"$GATE\" ]; do sleep 0.2; done"
  }
}
`

const (
	hostileImage = "capx.test/hostile/cluster:v1"
	gatedImage   = "capx.test/gated/cluster:v1"
)

// TestDestroyNamespacesKeepTenantsApart (issue 19, critical): two tenants on one manager, both
// namespaces deleted. Each namespace's objects are destroyed from a destroy namespace of its own
// (named from its UID, with its own runner account and lock Role), so tenant A's module, running
// its destroy there, can neither read, list, rewrite nor delete B's copied state, take B's state
// lock, plant a Secret beside B's copies nor read B's Events, and sees nothing of B in its own
// destroy namespace; B's infrastructure is destroyed with B's own state, and B's destroy
// namespace goes once it holds nothing. On the shared destroy namespace of before, every one of
// these reached B. (A's module may also fail on purpose to keep its copy alive: the copies of
// another namespace are out of its reach however long it stays.)
func TestDestroyNamespacesKeepTenantsApart(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	work := t.TempDir()
	report, gate := filepath.Join(work, "report"), filepath.Join(work, "gate")
	filter := fmt.Sprintf("tenants-%d", time.Now().UnixNano()%1e9)

	nsA, nsB := env.NewNamespace(t), env.NewNamespace(t)
	destA, destB := destroyNamespaceOf(t, nsA), destroyNamespaceOf(t, nsB)
	modules := map[string]string{hostileImage: moduleWith(t, "cluster", hostileModule), gatedImage: moduleWith(t, "cluster", gatedModule)}
	images := func(image string) (string, error) {
		if dir, ok := modules[image]; ok {
			return dir, nil
		}
		return moduleImages(image)
	}
	kubelets := map[string]*testenv.Kubelet{}
	for _, ns := range []string{nsA, nsB, destA, destB} {
		kubelets[ns] = env.StartKubeletIn(t, ns, images)
	}
	mgrtest.Start(t, env, "--providers=captf", "--drift-interval=0", "--watch-filter="+filter, "--destroy-namespace-prefix="+destroyPrefix)

	b := tenantCluster(t, nsB, filter, gatedImage, []corev1.EnvVar{{Name: "GATE", Value: gate}})
	waitFor(t, b, 2*time.Minute, "B provisioned", func(o *captfv1.TerraformCluster) bool { return provisioned(o.Status.Initialization) })
	victimSuffix := contract.StateSuffix(destB, captfv1.KindCluster, copyNameOf(b))
	a := tenantCluster(t, nsA, filter, hostileImage, []corev1.EnvVar{
		{Name: "KUBECTL", Value: filepath.Join(env.Root, "bin", "kubectl")},
		{Name: "VICTIM_NS", Value: destB},
		{Name: "VICTIM_STATE", Value: contract.StateSecretName(victimSuffix)},
		{Name: "VICTIM_LOCK", Value: contract.LockLeaseName(victimSuffix)},
		{Name: "REPORT", Value: report},
	})
	waitFor(t, a, 2*time.Minute, "A provisioned", func(o *captfv1.TerraformCluster) bool { return provisioned(o.Status.Initialization) })
	applied := readState(t, nsB, captfv1.KindCluster, "c")
	g.Expect(applied.Resources).To(BeNumerically(">", 0))

	// B's namespace goes first: its copy's destroy runs in B's destroy namespace and waits at
	// the gate, holding B's copied state and lock.
	deleteNamespace(t, nsB)
	g.Eventually(func() string { return kubelets[destB].Log.String() }, 2*time.Minute, 200*time.Millisecond).
		Should(ContainSubstring("captf-runner: starting destroy"), "B's copy destroys in "+destB)
	victim := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: destB, Name: contract.StateSecretName(victimSuffix)}, victim)).To(Succeed())
	lock := &coordinationv1.Lease{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: destB, Name: contract.LockLeaseName(victimSuffix)}, lock)).To(Succeed())

	// Then A's: its module runs in A's own destroy namespace and tries to reach B.
	deleteNamespace(t, nsA)
	g.Eventually(func() string { b, _ := os.ReadFile(report); return string(b) }, 3*time.Minute, 500*time.Millisecond).
		Should(ContainSubstring("done"), "A's module ran its destroy in "+destA)
	lines, _ := os.ReadFile(report)
	for _, attempt := range []string{"list", "read", "rewrite", "delete", "lock", "plant", "events"} {
		g.Expect(string(lines)).To(MatchRegexp(`(?m)^`+attempt+` [1-9][0-9]* .*[Ff]orbidden`), "A's module must not %s in B's destroy namespace:\n%s", attempt, lines)
	}
	own, _ := os.ReadFile(report + ".own")
	g.Expect(string(own)).To(ContainSubstring("secret/"+contract.StateSecretName(contract.StateSuffix(destA, captfv1.KindCluster, copyNameOf(a)))),
		"A's module reads its own copy's state (its identity works):\n%s", own)
	g.Expect(strings.ToLower(string(own))).NotTo(ContainSubstring(copyNameOf(b)), "nothing of B in A's destroy namespace")

	// B's copy and state are as they were.
	now := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(victim), now)).To(Succeed())
	g.Expect(now.ResourceVersion).To(Equal(victim.ResourceVersion), "B's copied state untouched")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(lock), lock)).To(Succeed())
	g.Expect(ptrValue(lock.Spec.HolderIdentity)).NotTo(Equal("hostile"))
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: destB, Name: "planted"}, &corev1.Secret{}))).To(BeTrue())

	// B's destroy finishes with B's state; B, its namespace and its destroy namespace go.
	g.Expect(os.WriteFile(gate, nil, 0o600)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(b), b))
	}, 2*time.Minute, 200*time.Millisecond).Should(BeTrue(), func() string { return "B gone; B:\n" + describe(b) })
	gone(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsB}}, 2*time.Minute)
	gone(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: destB}}, 2*time.Minute)
	added := regexp.MustCompile(`Apply complete! Resources: (\d+) added`).FindStringSubmatch(kubelets[nsB].Log.String())
	g.Expect(added).To(HaveLen(2), "B's apply")
	g.Expect(kubelets[destB].Log.String()).To(ContainSubstring("Destroy complete! Resources: "+added[1]+" destroyed"),
		"every resource B's apply made was destroyed, from B's own state")

	// A destroyed too, and everything of A goes.
	gone(t, a, 2*time.Minute)
	gone(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: destA}}, 2*time.Minute)
}

// destroyPrefix is the tests' --destroy-namespace-prefix.
const destroyPrefix = "captf-destroy-"

// destroyNamespaceOf is the destroy namespace the manager makes for ns.
func destroyNamespaceOf(t *testing.T, ns string) string {
	t.Helper()
	n := &corev1.Namespace{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, n); err != nil {
		t.Fatal(err)
	}
	return destroyPrefix + string(n.UID)
}

// copyNameOf is the name of an object's copy in its destroy namespace.
func copyNameOf(o client.Object) string {
	return o.GetName() + "-" + strings.ReplaceAll(string(o.GetUID()), "-", "")[:8]
}

// moduleWith is a test module of role with one more file.
func moduleWith(t *testing.T, role, extra string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(env.Root, "test", "modules", role)
	files, err := filepath.Glob(filepath.Join(src, "*.tf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("test module %s: %v", src, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "extra.tf"), []byte(extra), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tenantCluster is a Cluster "c" and its TerraformCluster in ns, for a manager with a watch
// filter, running image with env.
func tenantCluster(t *testing.T, ns, filter, image string, jobEnv []corev1.EnvVar) *captfv1.TerraformCluster {
	t.Helper()
	cluster := testenv.Cluster(ns, "c", "TerraformCluster", "c")
	cluster.Labels = map[string]string{clusterv1.WatchLabel: filter}
	create(t, cluster)
	tc := testenv.TerraformCluster(ns, "c", "c", image)
	tc.Labels[clusterv1.WatchLabel] = filter
	tc.Spec.Jobs = &captfv1.JobPolicy{Env: jobEnv}
	ownedBy(tc, cluster, "Cluster")
	create(t, tc)
	return tc
}

// deleteNamespace deletes a namespace as a tenant's administrator would.
func deleteNamespace(t *testing.T, ns string) {
	t.Helper()
	if err := env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
}

func ptrValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
