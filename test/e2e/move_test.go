//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/state"
	"github.com/capx-io/capx/test/e2e/install"
	"github.com/capx-io/capx/test/localcluster"
)

// TestClusterctlMove moves a provisioned CAPTF cluster with the real `clusterctl move` from the
// shared management cluster (providers installed from manifests, inventory registered by the
// installer) to a second one (providers installed by `clusterctl init`), and checks that:
//
//   - the source destroys nothing and keeps nothing: no destroy Job, no state Secret left;
//   - the target re-applies nothing: no apply or destroy Job, and every state keeps its
//     lineage, resources, outputs and applied inputs. Read-only Jobs may run: move drops status
//     and Jobs, so the target checks every object for drift at once and refreshes the pool's
//     membership; a drift check's refresh step may write a new serial of an unchanged state.
//   - the target's manager takes the objects over from their state alone (move drops status):
//     every object provisioned and Ready again, owner references rewritten to the target's
//     objects, state Secrets owned by the moved objects.
//
// clusterctl only moves a provisioned cluster. With no workload cluster, what a real one would
// provide is provided explicitly here: each Machine's status.nodeRef is set to a Node name (Cluster
// API then marks the control plane initialized, as it does for a cluster without a control-plane
// provider whose control-plane Machine has a Node), and the bootstrap data Secret, which the
// Machines name directly, gets the Cluster as owner, as a bootstrap provider's Secret would have
// one, so that move takes it along.
func TestClusterctlMove(t *testing.T) {
	const ns, name = "move", "moved"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	a := mgmtA(t)
	k := shared.kit
	g := NewWithT(t)

	// The target comes up while the source provisions.
	target := upInBackground(t, localcluster.Options{Name: clusterB}, k, install.FlowClusterctl)
	collectOnFailure(t, "move", a)
	tools := runbookTools(t)

	step(t, "provision a cluster on the source", func() {
		_, err := a.ApplyCluster(ctx, k.Repository, install.ClusterSpec{
			Name: name, Namespace: ns, Flavor: install.FlavorLocal, Workers: 1,
			Vars: map[string]string{"MACHINE_POOL_REPLICAS": "1"},
		})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a.WaitProvisioned(ctx, ns, name, 8*time.Minute)).To(Succeed())
	})

	step(t, "stand in for the workload cluster: Nodes for every Machine", func() {
		standInForWorkloadCluster(t, ctx, a, ns, name)
	})

	objs := captfObjects(g, ctx, a, ns, name)
	before := map[captfObject]*state.Snapshot{}
	step(t, "wait for the source to settle", func() {
		// The TerraformCluster re-applies once with control_plane_initialized; then nothing runs.
		// Idle once is not settled: between CAPI initializing the control plane and the
		// TerraformCluster starting that re-apply, every object looks applied and idle. Settled
		// is the same applied states 15 s apart, with no Job in between.
		idle := func(g Gomega) map[captfObject]*state.Snapshot {
			snaps := map[captfObject]*state.Snapshot{}
			for _, o := range objs {
				ws, provisioned, _ := workspaceOf(g, ctx, a, ns, o)
				g.Expect(provisioned).To(BeTrue(), "%s %s", o.Kind, o.Name)
				if o.Kind != captfv1.KindMachinePool { // the pool's membership refresh never stops
					g.Expect(ws.ActiveJob).To(BeNil(), "%s %s", o.Kind, o.Name)
				}
				snap := readState(g, ctx, a, ns, o)
				g.Expect(snap.InputsHash).To(Equal(ws.AppliedInputsHash), "%s %s applied its current inputs", o.Kind, o.Name)
				snaps[o] = snap
			}
			return snaps
		}
		eventually(t, 4*time.Minute, func(g Gomega) {
			first := idle(g)
			time.Sleep(15 * time.Second)
			now := idle(g)
			for _, o := range objs {
				g.Expect(appliedOf(now[o])).To(Equal(appliedOf(first[o])), "%s %s applied again", o.Kind, o.Name)
			}
			before = now
		}, "every object applied and idle for 15 s")
	})

	b := target()
	collectOnFailure(t, "move", b)
	sourceJobs := recordJobs(t, a, ns)
	targetJobs := recordJobs(t, b, ns)
	defer func() {
		t.Logf("CAPTF Jobs on the source after the move started:\n%s\non the target:\n%s", sourceJobs, targetJobs)
	}()

	// The move is the runbook's, every command as written: register the inventory on both
	// sides, the preflight, clusterctl move, the checks on the target.
	runRunbook(t, a, tools, "move-a-captf-cluster.md",
		map[string]string{"my-cluster": name, "team-a": ns, "target.kubeconfig": b.Kubeconfig()},
		map[string]func(){"2. Run the preflight": func() { waitPoolRefreshed(t, ctx, a, ns) }})

	step(t, "the target takes the objects over from their state", func() {
		eventually(t, 5*time.Minute, func(g Gomega) {
			cluster := &clusterv1.Cluster{}
			g.Expect(b.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
			g.Expect(ptr.Deref(cluster.Spec.Paused, false)).To(BeFalse(), "unpaused on the target")
			g.Expect(ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false)).To(BeTrue())
			for _, o := range objs {
				_, provisioned, conds := workspaceOf(g, ctx, b, ns, o)
				g.Expect(provisioned).To(BeTrue(), "%s %s provisioned on the target", o.Kind, o.Name)
				g.Expect(isTrue(conds, captfv1.ReadyCondition)).To(BeTrue(), "%s %s Ready on the target", o.Kind, o.Name)
			}
		}, "every object provisioned and Ready on the target")
		// Long enough for anything the takeover would start to show up.
		time.Sleep(20 * time.Second)
	})

	step(t, "nothing re-applied on the target, nothing destroyed or left on the source", func() {
		g.Expect(targetJobs.runs(opIs(string(captfv1.OperationApply), string(captfv1.OperationDestroy)))).To(BeEmpty(),
			"the target re-applied or destroyed:\n%s", targetJobs)
		g.Expect(sourceJobs.runs(opIs(string(captfv1.OperationDestroy)))).To(BeEmpty(), "the source destroyed:\n%s", sourceJobs)
		for _, o := range objs {
			snap := readState(g, ctx, b, ns, o)
			g.Expect(appliedOf(snap)).To(Equal(appliedOf(before[o])), "%s %s: the state on the target is the one applied on the source", o.Kind, o.Name)
			g.Expect(snap.Serial).To(BeNumerically(">=", before[o].Serial))
			checkOwnedOnTarget(g, ctx, b, ns, o, snap.Chunks[0])
		}
		left := &corev1.SecretList{}
		g.Expect(a.Client.List(ctx, left, client.InNamespace(ns), client.MatchingLabels{captfv1.ManagedLabel: "true"})).To(Succeed())
		g.Expect(left.Items).To(BeEmpty(), "the source kept CAPTF Secrets")
		clusters := &clusterv1.ClusterList{}
		g.Expect(a.Client.List(ctx, clusters, client.InNamespace(ns))).To(Succeed())
		g.Expect(clusters.Items).To(BeEmpty())
	})
}

// waitPoolRefreshed waits until the namespace's TerraformMachinePool Jobs (the membership
// refresh runs one a minute) have just finished, none runs, and one finished in the last 20 s:
// the preflight after it finds no block-move, as an operator who waits for the Job sees.
func waitPoolRefreshed(t *testing.T, ctx context.Context, m *install.Management, ns string) {
	eventually(t, 3*time.Minute, func(g Gomega) {
		jobs := &batchv1.JobList{}
		g.Expect(m.Client.List(ctx, jobs, client.InNamespace(ns), client.MatchingLabels{captfv1.OwnerKindLabel: captfv1.KindMachinePool})).To(Succeed())
		var last time.Time
		for _, j := range jobs.Items {
			var finished time.Time
			for _, c := range j.Status.Conditions {
				if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
					finished = c.LastTransitionTime.Time
				}
			}
			g.Expect(finished.IsZero()).To(BeFalse(), "Job %s runs", j.Name)
			if finished.After(last) {
				last = finished
			}
		}
		g.Expect(time.Since(last)).To(BeNumerically("<", 20*time.Second), "the last refresh finished %s ago", time.Since(last))
	}, "a pool refresh just finished")
}

// appliedState is what an apply changes in a state and a refresh does not.
type appliedState struct {
	Lineage    string
	Resources  int
	Outputs    map[string]state.Output
	InputsHash string
}

func appliedOf(s *state.Snapshot) appliedState {
	return appliedState{Lineage: s.Lineage, Resources: s.Resources, Outputs: s.Outputs, InputsHash: s.InputsHash}
}

// standInForWorkloadCluster provides what a workload cluster would: every Machine gets
// status.nodeRef (a Node of its own name), after which Cluster API marks the control plane
// initialized; and the bootstrap Secret gets the Cluster as owner, as a bootstrap provider's
// Secret has one, so that clusterctl move takes it along.
func standInForWorkloadCluster(t *testing.T, ctx context.Context, m *install.Management, ns, name string) {
	g := NewWithT(t)
	machines := &clusterv1.MachineList{}
	g.Expect(m.Client.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
	g.Expect(machines.Items).NotTo(BeEmpty())
	for i := range machines.Items {
		mc := &machines.Items[i]
		patch := client.MergeFrom(mc.DeepCopy())
		mc.Status.NodeRef = clusterv1.MachineNodeReference{Name: mc.Name}
		g.Expect(m.Client.Status().Patch(ctx, mc, patch)).To(Succeed())
	}
	cluster := &clusterv1.Cluster{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
	secret := &corev1.Secret{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-cloud-config"}, secret)).To(Succeed())
	patch := client.MergeFrom(secret.DeepCopy())
	secret.OwnerReferences = append(secret.OwnerReferences, metav1.OwnerReference{
		APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cluster.Name, UID: cluster.UID,
	})
	g.Expect(m.Client.Patch(ctx, secret, patch)).To(Succeed())
	eventually(t, 2*time.Minute, func(g Gomega) {
		g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
		g.Expect(conditions.IsTrue(cluster, clusterv1.ClusterControlPlaneInitializedCondition)).To(BeTrue())
		for _, mc := range machines.Items {
			got := &clusterv1.Machine{}
			g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(&mc), got)).To(Succeed())
			g.Expect(got.Status.NodeRef.IsDefined()).To(BeTrue(), "Machine %s kept its nodeRef", mc.Name)
		}
	}, "Cluster API sees the control plane initialized")
}

// checkOwnedOnTarget checks the owner chain after the move: the CAPTF object is owned by the
// target's CAPI object (clusterctl rewrote the UID) and its state Secret by the CAPTF object.
func checkOwnedOnTarget(g Gomega, ctx context.Context, m *install.Management, ns string, o captfObject, stateSecret string) {
	var obj client.Object
	switch o.Kind {
	case captfv1.KindCluster:
		obj = &captfv1.TerraformCluster{}
	case captfv1.KindMachine:
		obj = &captfv1.TerraformMachine{}
	default:
		obj = &captfv1.TerraformMachinePool{}
	}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: o.Name}, obj)).To(Succeed())
	g.Expect(obj.GetOwnerReferences()).NotTo(BeEmpty(), "%s %s has an owner", o.Kind, o.Name)
	for _, ref := range obj.GetOwnerReferences() {
		owner := &metav1.PartialObjectMetadata{}
		owner.SetGroupVersionKind(clusterv1.GroupVersion.WithKind(ref.Kind))
		g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, owner)).To(Succeed(), "owner %s/%s of %s %s", ref.Kind, ref.Name, o.Kind, o.Name)
		g.Expect(owner.GetUID()).To(Equal(ref.UID), "%s %s's owner reference names the target's %s", o.Kind, o.Name, ref.Kind)
	}
	secret := &corev1.Secret{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: stateSecret}, secret)).To(Succeed())
	var owned bool
	for _, ref := range secret.OwnerReferences {
		owned = owned || ref.UID == obj.GetUID()
	}
	g.Expect(owned).To(BeTrue(), "state Secret %s is owned by the moved %s %s", stateSecret, o.Kind, o.Name)
}
