package capitest_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/testenv/mgrtest"
)

// TestCAPIMachinePoolMachines: with CAPI's core controllers running, a TerraformMachinePool
// keeps a TerraformMachinePoolMachine per instance and CAPI's MachinePool controller makes a
// Machine for each, which appear and go as the pool scales. The cluster autoscaler's
// scale-down (mark one Machine with cluster.x-k8s.io/delete-machine, then lower the
// MachinePool's replicas through its scale subresource, as its clusterapi provider does)
// removes exactly that instance. A MachineHealthCheck of the pool's Machines remediates an
// instance whose Node is not ready: CAPI marks its Machine, CAPTF deletes it, and the module
// replaces exactly that instance, the replicas unchanged. The workload cluster is the test API
// server itself, where the test plays each instance's kubelet by creating its Node.
func TestCAPIMachinePoolMachines(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := besideCAPI(t)

	cluster := testenv.Cluster(ns, "pmm", "TerraformCluster", "pmm")
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	tc := testenv.TerraformCluster(ns, "pmm", "pmm", "capx.test/modules/cluster:v1")
	tc.Spec.Variables = map[string]apiextensionsv1.JSON{"endpoint_host": {Raw: []byte(`"192.0.2.11"`)}}
	g.Expect(env.Client.Create(ctx, tc)).To(Succeed())
	g.Expect(env.Client.Create(ctx, kubeconfigSecret(t, ns, "pmm"))).To(Succeed())

	// A control-plane Machine with a Node: a MachineHealthCheck remediates worker Machines
	// only once the cluster's control plane is initialized. CAPI's Machine controller watches
	// the workload cluster's Nodes only from then on, so nothing would bring the control-plane
	// Machine back when its Node appears: its Node (the test module's provider ID) is there
	// before the Machine is provisioned, as the first control plane's Node would be on its
	// first look.
	nodes := &nodePlayer{t: t}
	nodes.ready("capx-test:///pmm-cp")
	g.Expect(env.Client.Create(ctx, testenv.BootstrapSecret(ns, "pmm-cp-bootstrap", "pmm", "#cloud-config\n"))).To(Succeed())
	cp := testenv.Machine(ns, "pmm-cp", "pmm", "TerraformMachine", "pmm-cp", "pmm-cp-bootstrap")
	cp.Labels[clusterv1.MachineControlPlaneLabel] = ""
	cp.Spec.Version = "v1.36.3"
	g.Expect(env.Client.Create(ctx, cp)).To(Succeed())
	g.Expect(env.Client.Create(ctx, testenv.TerraformMachine(ns, "pmm-cp", "pmm", "capx.test/modules/machine:v1"))).To(Succeed())

	g.Expect(env.Client.Create(ctx, testenv.BootstrapSecret(ns, "pmw-bootstrap", "pmm", "#cloud-config\n"))).To(Succeed())
	mp := testenv.MachinePool(ns, "pmw", "pmm", "TerraformMachinePool", "pmw", "pmw-bootstrap", 3)
	mp.Spec.Template.Spec.Version = "v1.36.3"
	g.Expect(env.Client.Create(ctx, mp)).To(Succeed())
	tmp := testenv.TerraformMachinePool(ns, "pmw", "pmm", "capx.test/modules/machinepool:v1")
	g.Expect(env.Client.Create(ctx, tmp)).To(Succeed())

	// machinesWhere waits until the pool has exactly these many instances and CAPI a Machine
	// for each (matched by provider ID, each on its own TerraformMachinePoolMachine owned by the
	// pool and by its Machine) and want holds of them (provider ID -> Machine name), then gives
	// every Machine a ready Node and returns them.
	machinesWhere := func(n int, what string, want func(g Gomega, byID map[string]string)) map[string]string {
		t.Helper()
		var byID map[string]string
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tmp), tmp)).To(Succeed())
			g.Expect(tmp.Spec.ProviderIDList).To(HaveLen(n), "instances")
			g.Expect(tmp.Status.InfrastructureMachineKind).To(Equal("TerraformMachinePoolMachine"))
			var list clusterv1.MachineList
			g.Expect(env.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachinePoolNameLabel: "pmw"})).To(Succeed())
			byID = map[string]string{}
			for _, m := range list.Items {
				g.Expect(m.DeletionTimestamp.IsZero()).To(BeTrue(), "Machine %s is still being deleted", m.Name)
				g.Expect(m.OwnerReferences).To(ContainElement(HaveField("Kind", "MachinePool")))
				g.Expect(m.Spec.InfrastructureRef.Kind).To(Equal("TerraformMachinePoolMachine"))
				im := &captfv1.TerraformMachinePoolMachine{}
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Spec.InfrastructureRef.Name}, im)).To(Succeed())
				g.Expect(im.OwnerReferences).To(ContainElements(
					And(HaveField("Kind", "TerraformMachinePool"), HaveField("UID", tmp.UID)),
					And(HaveField("Kind", "Machine"), HaveField("Controller", ptr.To(true)))))
				g.Expect(m.Spec.ProviderID).To(Equal(im.Spec.ProviderID), "the Machine takes its provider ID from its infrastructure machine")
				byID[m.Spec.ProviderID] = m.Name
			}
			g.Expect(slices.Sorted(maps.Keys(byID))).To(Equal(tmp.Spec.ProviderIDList), "one Machine per instance")
			want(g, byID)
		}, 4*time.Minute, 500*time.Millisecond).Should(Succeed(), "%s: %s", what, mgrtest.Describe(tmp))
		for id := range byID {
			nodes.ready(id)
		}
		return byID
	}
	machines := func(n int, what string) map[string]string {
		return machinesWhere(n, what, func(Gomega, map[string]string) {})
	}

	at3 := machines(3, "provisioned with 3 instances")
	g.Eventually(func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)
		return conditions.IsTrue(cluster, clusterv1.ClusterControlPlaneInitializedCondition), err
	}, 3*time.Minute, 250*time.Millisecond).Should(BeTrue(), "the control-plane Machine has its Node: the control plane is initialized")

	scaleTo(t, mp, 4)
	at4 := machines(4, "scaled up to 4")
	for id, name := range at3 {
		g.Expect(at4).To(HaveKeyWithValue(id, name), "scaling up keeps every Machine")
	}
	scaleTo(t, mp, 3)
	at3 = machines(3, "scaled down to 3")
	g.Expect(slices.Collect(maps.Keys(at4))).To(ContainElements(slices.Collect(maps.Keys(at3))), "scaling down only removes")

	// The autoscaler's scale-down of one node: the first instance, which a plain scale-down
	// (the module trims the last) would not choose.
	ids := slices.Sorted(maps.Keys(at3))
	victim := ids[0]
	markForDeletion(t, ns, at3[victim])
	g.Expect(env.Client.SubResource("scale").Update(ctx, mp, client.WithSubResourceBody(&autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mp.Name}, Spec: autoscalingv1.ScaleSpec{Replicas: 2},
	}))).To(Succeed())
	at2 := machines(2, "the autoscaler removed one node")
	g.Expect(at2).To(Equal(map[string]string{ids[1]: at3[ids[1]], ids[2]: at3[ids[2]]}),
		"exactly the marked instance went; the other Machines are the same")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp)).To(Succeed())
	g.Expect(ptr.Deref(mp.Spec.Replicas, -1)).To(Equal(int32(2)))

	// A MachineHealthCheck of the pool's Machines remediates an instance whose Node is not
	// ready: CAPI's MHC marks its Machine OwnerRemediated=False, CAPTF deletes that Machine, and
	// the module replaces exactly that instance (instances_to_remove, replicas unchanged). CAPI
	// reconciles a MachineHealthCheck at most every 15 s, so the Node is unhealthy before the
	// check exists and the check's timeout is 0: its first pass remediates.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pool objects:\n%s", describePool(ns, "pmw"))
		}
	})
	sick, kept := ids[1], ids[2]
	nodes.notReady(sick)
	g.Expect(env.Client.Create(ctx, &clusterv1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pmw"},
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: "pmm",
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachinePoolNameLabel: "pmw"}},
			Checks: clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To(int32(0))},
			}},
		},
	})).To(Succeed())
	after := machinesWhere(2, "the unhealthy instance replaced", func(g Gomega, byID map[string]string) {
		g.Expect(byID).NotTo(HaveKey(sick), "the unhealthy instance is gone")
		g.Expect(byID).To(HaveKeyWithValue(kept, at2[kept]), "the healthy instance and its Machine stay")
	})
	delete(after, kept)
	g.Expect(after).To(HaveLen(1))
	for id, name := range after {
		g.Expect(at2).NotTo(HaveKey(id), "the replacement is another instance")
		g.Expect(slices.Collect(maps.Values(at2))).NotTo(ContainElement(name), "the replacement has a Machine of its own")
	}
	g.Expect(events(ns, "Machine", at2[sick], "MachineMarkedUnhealthy")).To(HaveLen(1), "CAPI's MachineHealthCheck marked the unhealthy Machine")
	g.Expect(events(ns, "Machine", at2[kept], "MachineMarkedUnhealthy")).To(BeEmpty(), "and not the healthy one")
	g.Expect(events(ns, "TerraformMachinePool", "pmw", "MachineDeleted")).To(ContainElement(
		"Machine "+at2[sick]+" deleted: "+"a MachineHealthCheck marked it for remediation (OwnerRemediated=False)"),
		"CAPTF deleted the Machine the MachineHealthCheck marked")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp)).To(Succeed())
	g.Expect(ptr.Deref(mp.Spec.Replicas, -1)).To(Equal(int32(2)), "a remediation keeps the replicas")
}

// events are the messages of the Events of one object (by kind and name) and reason.
func events(ns, kind, name, reason string) []string {
	var list corev1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

// describePool is what a failed pool test logs: the pool's conditions and inputs, its
// Machines and infrastructure machines (deletion, finalizers, conditions), its Jobs and the
// namespace's Events.
func describePool(ns, pool string) string {
	ctx := context.Background()
	var b strings.Builder
	tmp := &captfv1.TerraformMachinePool{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pool}, tmp); err == nil {
		fmt.Fprintf(&b, "TerraformMachinePool %s: providerIDList %v\n%s", pool, tmp.Spec.ProviderIDList, mgrtest.Describe(tmp))
	}
	var machines clusterv1.MachineList
	_ = env.Client.List(ctx, &machines, client.InNamespace(ns))
	for _, m := range machines.Items {
		fmt.Fprintf(&b, "Machine %s: providerID %s deleting=%v finalizers %v nodeRef %q\n", m.Name, m.Spec.ProviderID, !m.DeletionTimestamp.IsZero(), m.Finalizers, m.Status.NodeRef.Name)
		for _, c := range m.Status.Conditions {
			if c.Status != metav1.ConditionTrue {
				fmt.Fprintf(&b, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}
	var infra captfv1.TerraformMachinePoolMachineList
	_ = env.Client.List(ctx, &infra, client.InNamespace(ns))
	for _, m := range infra.Items {
		fmt.Fprintf(&b, "TerraformMachinePoolMachine %s: %s deleting=%v finalizers %v\n", m.Name, m.Spec.InstanceID, !m.DeletionTimestamp.IsZero(), m.Finalizers)
	}
	var jobs batchv1.JobList
	_ = env.Client.List(ctx, &jobs, client.InNamespace(ns))
	for _, j := range jobs.Items {
		fmt.Fprintf(&b, "Job %s: active %d succeeded %d failed %d created %s\n", j.Name, j.Status.Active, j.Status.Succeeded, j.Status.Failed, j.CreationTimestamp.Format(time.TimeOnly))
	}
	var events corev1.EventList
	_ = env.Client.List(ctx, &events, client.InNamespace(ns))
	for _, e := range events.Items {
		fmt.Fprintf(&b, "Event %s %s/%s %s: %s\n", e.LastTimestamp.Format(time.TimeOnly), e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
	return b.String()
}

// scaleTo sets the MachinePool's replicas as a person would.
func scaleTo(t *testing.T, mp *clusterv1.MachinePool, replicas int32) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(mp), mp); err != nil {
			return err
		}
		before := mp.DeepCopy()
		mp.Spec.Replicas = ptr.To(replicas)
		return env.Client.Patch(context.Background(), mp, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
}

// markForDeletion is the cluster autoscaler's MarkMachineForDeletion: an update of the Machine
// with the delete-machine annotation set to the time.
func markForDeletion(t *testing.T, ns, name string) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		m := &clusterv1.Machine{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
			return err
		}
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[clusterv1.DeleteMachineAnnotation] = time.Now().String()
		return env.Client.Update(context.Background(), m)
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
}

// nodePlayer creates and updates the Nodes of instances, as their kubelets would.
type nodePlayer struct {
	t     *testing.T
	names []string
}

func (p *nodePlayer) nodeName(providerID string) string {
	return strings.ToLower(strings.NewReplacer(":", "", "/", "").Replace(strings.TrimPrefix(providerID, "capx-test:///")))
}

func (p *nodePlayer) ready(providerID string) { p.set(providerID, corev1.ConditionTrue) }

func (p *nodePlayer) notReady(providerID string) { p.set(providerID, corev1.ConditionFalse) }

func (p *nodePlayer) set(providerID string, ready corev1.ConditionStatus) {
	p.t.Helper()
	ctx := context.Background()
	g := NewWithT(p.t)
	name := p.nodeName(providerID)
	node := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
		g.Expect(env.Client.Create(ctx, node)).To(Succeed())
		p.names = append(p.names, name)
		if len(p.names) == 1 {
			p.t.Cleanup(func() {
				for _, n := range p.names {
					_ = env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
				}
			})
		}
	}
	now := metav1.Now()
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Reason: "Played",
		LastHeartbeatTime: now, LastTransitionTime: now}}
	g.Expect(env.Client.Status().Update(ctx, node)).To(Succeed())
}

// kubeconfigSecret is the Cluster's kubeconfig: the test API server is its workload cluster.
func kubeconfigSecret(t *testing.T, ns, cluster string) *corev1.Secret {
	t.Helper()
	kubeconfig, err := os.ReadFile(env.KubeconfigPath)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster + "-kubeconfig", Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
		Type:       clusterv1.ClusterSecretType,
		Data:       map[string][]byte{"value": kubeconfig},
	}
}
