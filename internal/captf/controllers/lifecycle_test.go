package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/state"
	"github.com/capx-io/capx/internal/testenv"
)

func mustSerial(t *testing.T, ns, suffix string) int64 {
	t.Helper()
	s, err := state.Read(context.Background(), env.Client, ns, suffix)
	if err != nil {
		t.Fatalf("read state: %v", err)
	}
	return s.Serial
}

// approve approves a plan as the named user (impersonated, so the admission policy checks the
// name against a real authenticated user).
func approve(t *testing.T, plan *captfv1.TerraformPlan, user string) {
	t.Helper()
	c := env.As(t, user)
	patch := client.MergeFrom(plan.DeepCopy())
	plan.Spec.Approved, plan.Spec.ApprovedBy = true, user
	if err := c.Patch(context.Background(), plan, patch); err != nil {
		t.Fatalf("approve %s as %s: %v", plan.Name, user, err)
	}
}

// TestClusterLifecycle: a TerraformCluster is applied, provisioned with the module's endpoint,
// re-applied when a variable changes, and destroyed when deleted, all through real Jobs (the
// Job controller and garbage collector of kube-controller-manager, the real runner and real
// OpenTofu) with the state in real Secrets.
func TestClusterLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	ns := env.NewNamespace(t)

	cluster := testenv.Cluster(ns, "c1", "TerraformCluster", "c1")
	create(t, cluster)
	tc := testenv.TerraformCluster(ns, "c1", "c1", clusterImage)
	tc.Spec.Variables = map[string]apiextensionsv1.JSON{
		"endpoint_host": {Raw: []byte(`"10.0.0.10"`)},
		"network_cidr":  {Raw: []byte(`"10.0.0.0/24"`)},
	}
	ownedBy(tc, cluster, "Cluster")
	create(t, tc)

	waitFor(t, tc, 3*time.Minute, "provisioned with an endpoint", func(o *captfv1.TerraformCluster) bool {
		return provisioned(o.Status.Initialization) && o.Spec.ControlPlaneEndpoint.IsValid()
	})
	// The backup of the applied serial is taken by the pass after the one that read the result.
	waitFor(t, tc, 30*time.Second, "the applied serial backed up", func(o *captfv1.TerraformCluster) bool {
		return len(o.Status.StateBackups) > 0
	})
	g.Expect(tc.Spec.ControlPlaneEndpoint.Host).To(Equal("10.0.0.10"))
	g.Expect(tc.Annotations[captfv1.EndpointSourceAnnotation]).To(Equal("module"))
	g.Expect(conditions.IsTrue(tc, captfv1.ReadyCondition)).To(BeTrue(), describe(tc))
	suffix := contract.StateSuffix(ns, captfv1.KindCluster, "c1")
	snap, err := state.Read(ctx, env.Client, ns, suffix)
	g.Expect(err).NotTo(HaveOccurred())
	firstSerial := snap.Serial
	g.Expect(snap.InputsHash).NotTo(BeEmpty())
	g.Expect(tc.Status.StateBackups).NotTo(BeEmpty(), "the applied serial is backed up")

	// Owner references lost (a management cluster restored from a backup without them) are
	// repaired on the next reconcile, before the garbage collector could take anything.
	for _, name := range []string{contract.StateSecretName(suffix), "captf-inputs-c-c1"} {
		s := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
		s.OwnerReferences = nil
		g.Expect(env.Client.Update(ctx, s)).To(Succeed())
		g.Eventually(func() ([]metav1.OwnerReference, error) {
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)
			return s.OwnerReferences, err
		}, time.Minute, 200*time.Millisecond).Should(ContainElement(HaveField("UID", tc.UID)), "owner of %s repaired", name)
	}

	// A changed variable re-applies the cluster: a third failure domain is only created.
	patch := client.MergeFrom(tc.DeepCopy())
	tc.Spec.Variables["failure_domains"] = apiextensionsv1.JSON{Raw: []byte(`["fd-a","fd-b","fd-c"]`)}
	g.Expect(env.Client.Patch(ctx, tc, patch)).To(Succeed())
	g.Eventually(func() (int64, error) {
		s, err := state.Read(ctx, env.Client, ns, suffix)
		if err != nil {
			return 0, err
		}
		return s.Serial, nil
	}, 2*time.Minute, 200*time.Millisecond).Should(BeNumerically(">", firstSerial))
	waitFor(t, tc, 2*time.Minute, "the new inputs applied", func(o *captfv1.TerraformCluster) bool {
		return o.Status.LastRun != nil && o.Status.LastRun.Result == captfv1.RunSucceeded &&
			o.Status.ActiveJob == nil && o.Status.AppliedInputsHash != snap.InputsHash && len(o.Status.FailureDomains) == 3
	})

	// A change that replaces the network is held by the destructive-plan guard until a
	// TerraformPlan naming exactly that plan is approved.
	patch = client.MergeFrom(tc.DeepCopy())
	tc.Spec.Variables["network_cidr"] = apiextensionsv1.JSON{Raw: []byte(`"10.1.0.0/24"`)}
	g.Expect(env.Client.Patch(ctx, tc, patch)).To(Succeed())
	waitFor(t, tc, 2*time.Minute, "the destructive plan blocked", func(o *captfv1.TerraformCluster) bool {
		c := conditions.Get(o, captfv1.ApplyJobSucceededCondition)
		return c != nil && c.Reason == captfv1.DestructivePlanBlockedReason && o.Status.PendingPlanRef != nil
	})
	plan := &captfv1.TerraformPlan{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.Status.PendingPlanRef.Name}, plan)).To(Succeed())
	g.Expect(plan.Spec.Reason).To(Equal(captfv1.PlanReasonDestructive))
	g.Expect(plan.Spec.Summary.Replace).To(BeNumerically(">=", 1))
	g.Expect(plan.Spec.Summary.Resources).To(ContainElement(ContainSubstring("terraform_data.network")))
	g.Expect(conditions.IsTrue(tc, captfv1.ReadyCondition)).To(BeTrue(), "a held plan never makes a provisioned cluster un-ready")
	serialBefore := mustSerial(t, ns, suffix)
	g.Consistently(func() int64 { return mustSerial(t, ns, suffix) }, 3*time.Second, 500*time.Millisecond).
		Should(Equal(serialBefore), "nothing is applied while the plan waits")

	approve(t, plan, "alice")
	waitFor(t, tc, 3*time.Minute, "the approved plan applied", func(o *captfv1.TerraformCluster) bool {
		return conditions.IsTrue(o, captfv1.ApplyJobSucceededCondition) && o.Status.ActiveJob == nil &&
			mustSerial(t, ns, suffix) > serialBefore && o.Status.PendingPlanRef == nil
	})
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(plan), plan)).To(Succeed())
	g.Expect(plan.Status.Phase).To(Equal(captfv1.PlanApplied))

	// The runner reported its steps as Events on the object, naming its Job.
	events := &eventsv1.EventList{}
	g.Expect(env.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
	var steps []string
	for _, e := range events.Items {
		if e.Regarding.UID == tc.UID && e.ReportingController == "captf.io/runner" && e.Related != nil {
			steps = append(steps, e.Reason+": "+e.Note)
		}
	}
	g.Expect(steps).To(ContainElement(HavePrefix("StepSucceeded: step apply finished")))
	g.Expect(steps).To(ContainElement(HavePrefix("RunFinished: apply succeeded")))

	// Deleting destroys, then the finalizer goes with the state.
	g.Expect(env.Client.Delete(ctx, tc)).To(Succeed())
	gone(t, tc, 3*time.Minute)
	_, err = state.Read(ctx, env.Client, ns, suffix)
	g.Expect(state.Reason(err)).To(Equal(captfv1.StateNotFoundReason), "the state Secrets are cleaned up")
	ops := map[string]int{}
	for _, j := range jobsOf(t, ns, captfv1.KindCluster, "c1") {
		ops[j.Labels[captfv1.OperationLabel]]++
	}
	t.Logf("Jobs left: %v", ops)
}
