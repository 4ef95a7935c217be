//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/test/e2e/install"
)

// TestCAPTFLifecycle drives a CAPTF cluster through its life on a real management cluster:
// Cluster API core's controllers, the capx manager in its pod, and real Jobs on the kubelet
// running the runner and OpenTofu with the state in Secrets.
//
//  1. A cluster from the "local" template (a TerraformCluster, a control-plane Machine, a
//     MachineDeployment of one, a MachinePool of two) is provisioned: CAPI copies the endpoint,
//     failure domains and provider IDs from our objects, and each object ran exactly one apply.
//  2. A changed variable re-applies the TerraformCluster: a new serial, and CAPI's Cluster sees
//     the third failure domain.
//  3. The manager is killed (SIGKILL) while a machine's apply Job runs: the Job finishes
//     without it, the restarted manager adopts that same Job (no second apply) and records its
//     result; the state holds everything the apply created.
//  4. Deleting the Cluster destroys every object through destroy Jobs (the TerraformCluster
//     last) and leaves no state Secret.
//
// There is no workload cluster: Machines get provider IDs but never a Node, so nothing here
// waits for Nodes.
func TestCAPTFLifecycle(t *testing.T) {
	const ns, name = "lifecycle", "life"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	m := mgmtA(t)
	collectOnFailure(t, "lifecycle", m)
	g := NewWithT(t)

	step(t, "create a cluster from the local template and wait until provisioned", func() {
		_, err := m.ApplyCluster(ctx, shared.kit.Repository, install.ClusterSpec{
			Name: name, Namespace: ns, Flavor: install.FlavorLocal, Workers: 1,
		})
		g.Expect(err).NotTo(HaveOccurred())
	})
	jobs := recordJobs(t, m, ns)
	defer func() { t.Logf("CAPTF Jobs seen in %s:\n%s", ns, jobs) }()
	step(t, "provisioned", func() {
		g.Expect(m.WaitProvisioned(ctx, ns, name, 8*time.Minute)).To(Succeed())
	})

	var objs []captfObject
	step(t, "check what CAPI took from the CAPTF objects", func() {
		objs = captfObjects(g, ctx, m, ns, name)
		g.Expect(objs).To(HaveLen(4), "a TerraformCluster, two TerraformMachines, a TerraformMachinePool: %v", objs)

		cluster := &clusterv1.Cluster{}
		g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
		g.Expect(cluster.Spec.ControlPlaneEndpoint.Host).To(Equal(name + "." + ns + ".capx.test"))
		g.Expect(cluster.Spec.ControlPlaneEndpoint.Port).To(BeEquivalentTo(6443))
		g.Expect(failureDomains(cluster)).To(ConsistOf("fd-a", "fd-b"))

		machines := &clusterv1.MachineList{}
		g.Expect(m.Client.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
		for _, mc := range machines.Items {
			g.Expect(mc.Spec.ProviderID).To(Equal("capx-test:///"+mc.Spec.InfrastructureRef.Name), "Machine %s", mc.Name)
		}
		for _, o := range objs {
			ws, provisioned, conds := workspaceOf(g, ctx, m, ns, o)
			g.Expect(provisioned).To(BeTrue(), "%s %s", o.Kind, o.Name)
			g.Expect(isTrue(conds, captfv1.ReadyCondition)).To(BeTrue(), "%s %s Ready", o.Kind, o.Name)
			snap := readState(g, ctx, m, ns, o)
			g.Expect(snap.InputsHash).To(Equal(ws.AppliedInputsHash), "%s %s: the state records the inputs applied", o.Kind, o.Name)
			g.Expect(jobs.runs(of(o.Kind, o.Name, string(captfv1.OperationApply)))).To(HaveLen(1), "one apply Job for %s %s:\n%s", o.Kind, o.Name, jobs)
		}
	})

	clusterObj := captfObject{captfv1.KindCluster, name}
	step(t, "a changed variable re-applies the TerraformCluster", func() {
		before := readState(g, ctx, m, ns, clusterObj)
		tc := &captfv1.TerraformCluster{}
		g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tc)).To(Succeed())
		patch := client.MergeFrom(tc.DeepCopy())
		tc.Spec.Variables["failure_domains"] = apiextensionsv1.JSON{Raw: []byte(`["fd-a","fd-b","fd-c"]`)}
		g.Expect(m.Client.Patch(ctx, tc, patch)).To(Succeed())

		eventually(t, 4*time.Minute, func(g Gomega) {
			cluster := &clusterv1.Cluster{}
			g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
			g.Expect(failureDomains(cluster)).To(ConsistOf("fd-a", "fd-b", "fd-c"))
			g.Expect(readState(g, ctx, m, ns, clusterObj).Serial).To(BeNumerically(">", before.Serial))
			ws, _, _ := workspaceOf(g, ctx, m, ns, clusterObj)
			g.Expect(ws.ActiveJob).To(BeNil())
		}, "the new failure domain applied and seen by CAPI")
		g.Expect(jobs.runs(of(captfv1.KindCluster, name, string(captfv1.OperationApply)))).To(HaveLen(2), "%s", jobs)
	})

	step(t, "the manager killed mid-apply converges without a second Job", func() {
		killManagerMidApply(t, ctx, m, jobs, ns, name)
	})

	step(t, "deleting the Cluster destroys everything", func() {
		objs = captfObjects(g, ctx, m, ns, name)
		deleteCluster(t, ctx, m, ns, name)
		eventually(t, 8*time.Minute, func(g Gomega) {
			err := m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &clusterv1.Cluster{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Cluster is still there")
		}, "the Cluster gone")
		var clusterDestroy jobRun
		var others []jobRun
		for _, o := range objs {
			destroys := jobs.runs(of(o.Kind, o.Name, string(captfv1.OperationDestroy)))
			g.Expect(destroys).NotTo(BeEmpty(), "no destroy Job for %s %s:\n%s", o.Kind, o.Name, jobs)
			g.Expect(destroys[len(destroys)-1].Succeeded).To(BeTrue(), "the last destroy of %s %s succeeded", o.Kind, o.Name)
			if o.Kind == captfv1.KindCluster {
				clusterDestroy = destroys[0]
			} else {
				others = append(others, destroys...)
			}
		}
		for _, d := range others {
			g.Expect(d.Created.After(clusterDestroy.Created)).To(BeFalse(), "%s %s destroyed after the TerraformCluster", d.Kind, d.Owner)
		}
		secrets := &corev1.SecretList{}
		g.Expect(m.Client.List(ctx, secrets, client.InNamespace(ns), client.MatchingLabels{"tfstate": "true"})).To(Succeed())
		g.Expect(secrets.Items).To(BeEmpty(), "state Secrets left behind")
	})
}

// killManagerMidApply adds a machine whose apply sleeps 40 s after creating its instance (the
// test module's `slow` variable), SIGKILLs the manager's container while that apply Job runs,
// and checks that the restarted manager converges on that one Job.
func killManagerMidApply(t *testing.T, ctx context.Context, m *install.Management, jobs *jobRecorder, ns, cluster string) {
	g := NewWithT(t)
	const name = "life-slow"
	machine := testenv.Machine(ns, name, cluster, captfv1.KindMachine, name, cluster+"-cloud-config")
	machine.Spec.Version = "v1.36.3"
	g.Expect(m.Client.Create(ctx, machine)).To(Succeed())
	tm := testenv.TerraformMachine(ns, name, cluster, shared.kit.Images.Module("machine"))
	tm.Spec.Variables = map[string]apiextensionsv1.JSON{"slow": {Raw: []byte(`40`)}}
	g.Expect(m.Client.Create(ctx, tm)).To(Succeed())
	obj := captfObject{captfv1.KindMachine, name}

	// Mid-apply: the runner's apply step is inside the local-exec sleep, after the instance
	// was created.
	var applyJob string
	eventually(t, 4*time.Minute, func(g Gomega) {
		runs := jobs.runs(of(captfv1.KindMachine, name, string(captfv1.OperationApply)))
		g.Expect(runs).NotTo(BeEmpty())
		applyJob = runs[0].Name
		log := jobLog(g, ctx, m, ns, applyJob)
		g.Expect(log).To(ContainSubstring("terraform_data.slow[0]: Creating..."))
	}, "the slow apply in its sleep")

	pod := managerPod(g, ctx, m)
	restarts := pod.Status.ContainerStatuses[0].RestartCount
	killed := time.Now()
	g.Expect(m.KillContainer(ctx, pod.Status.ContainerStatuses[0].ContainerID)).To(Succeed())
	t.Logf("killed the manager (pod %s, %d restarts before) while Job %s ran", pod.Name, restarts, applyJob)

	eventually(t, 5*time.Minute, func(g Gomega) {
		p := managerPod(g, ctx, m)
		g.Expect(p.Name).To(Equal(pod.Name), "the same pod, its container restarted")
		g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeNumerically(">", restarts))
		ws, provisioned, _ := workspaceOf(g, ctx, m, ns, obj)
		g.Expect(provisioned).To(BeTrue())
		g.Expect(ws.ActiveJob).To(BeNil())
		g.Expect(ws.LastRun).NotTo(BeNil())
		g.Expect(ws.LastRun.Job).To(Equal(applyJob))
		g.Expect(ws.LastRun.Result).To(Equal(captfv1.RunSucceeded))
	}, "the restarted manager records the result of the Job it did not see finish")

	runs := jobs.runs(of(captfv1.KindMachine, name, string(captfv1.OperationApply)))
	g.Expect(runs).To(HaveLen(1), "one apply Job, no duplicate:\n%s", jobs)
	g.Expect(runs[0].Succeeded).To(BeTrue())
	g.Expect(runs[0].Finished.After(killed)).To(BeTrue(), "the Job was still running when the manager died (finished %s, killed %s)", runs[0].Finished, killed)
	snap := readState(g, ctx, m, ns, obj)
	g.Expect(snap.Resources).To(Equal(2), "the instance and the slow step are both in the state")
	ws, _, _ := workspaceOf(g, ctx, m, ns, obj)
	g.Expect(snap.InputsHash).To(Equal(ws.AppliedInputsHash))
	tmNow := &captfv1.TerraformMachine{}
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(tm), tmNow)).To(Succeed())
	g.Expect(tmNow.Spec.ProviderID).To(Equal("capx-test:///" + name))
}

// deleteCluster deletes a CAPI Cluster, retrying while Cluster API's webhook does not answer (its
// manager restarting under load), as a user would.
func deleteCluster(t *testing.T, ctx context.Context, m *install.Management, ns, name string) {
	eventually(t, 2*time.Minute, func(g Gomega) {
		cluster := &clusterv1.Cluster{}
		g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
		g.Expect(m.Client.Delete(ctx, cluster)).To(Succeed())
	}, "Cluster "+ns+"/"+name+" deleted")
}

// jobLog is the log of the module container of a Job's pod ("" until it has one).
func jobLog(g Gomega, ctx context.Context, m *install.Management, ns, job string) string {
	pods := &corev1.PodList{}
	g.Expect(m.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"job-name": job})).To(Succeed())
	var b strings.Builder
	for _, p := range pods.Items {
		out, err := m.Kubectl(ctx, nil, "logs", "-n", ns, p.Name, "-c", "source")
		if err == nil {
			b.Write(out)
		}
	}
	return b.String()
}

// managerPod is the running capx manager pod.
func managerPod(g Gomega, ctx context.Context, m *install.Management) corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(m.Client.List(ctx, pods, client.InNamespace(install.ProviderNamespace),
		client.MatchingLabels{"app.kubernetes.io/name": "capx", "app.kubernetes.io/component": "manager"})).To(Succeed())
	var running []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 {
			running = append(running, p)
		}
	}
	g.Expect(running).To(HaveLen(1), "one running manager pod")
	return running[0]
}

func failureDomains(c *clusterv1.Cluster) []string {
	var names []string
	for _, fd := range c.Status.FailureDomains {
		names = append(names, fd.Name)
	}
	return names
}

func isTrue(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
