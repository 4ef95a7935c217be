package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/jobs"
)

// TestPodRefusalQuota: a ResourceQuota that admits no Pods refuses the Job's Pods, not the Job.
// The dry run of the Job's Pod finds it before any Job exists: ApplyJobSucceeded says
// PodQuotaExceeded, naming the quota, and no Job waits out its deadline.
func TestPodRefusalQuota(t *testing.T) {
	g := NewWithT(t)
	ns, _ := scenario(t)
	newForeignCluster(t, ns, "c")
	create(t, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	})
	tm := newTerraformMachine(t, ns, "c", "m1", nil)
	waitFor(t, tm, time.Minute, "the Pods refused by the quota", func(o *captfv1.TerraformMachine) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionFalse, captfv1.PodQuotaExceededReason)
	})
	g.Expect(conditions.GetMessage(tm, captfv1.ApplyJobSucceededCondition)).To(ContainSubstring("no-pods"))
	never(t, 3*time.Second, "a Job was created", func() bool { return len(jobsOf(t, ns, captfv1.KindMachine, "m1")) > 0 })
}

// TestPodRefusalPodSecurity: the Job's Pods meet the restricted Pod Security profile, so a
// namespace that enforces it runs them.
func TestPodRefusalPodSecurity(t *testing.T) {
	g := NewWithT(t)
	ns, _ := scenario(t)
	update(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, func(o *corev1.Namespace) {
		o.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
		o.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
	})
	// The profile is enforced: a Pod without a security context is refused.
	g.Eventually(func() string {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "probe-"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "probe"}}}}
		if err := env.Client.Create(context.Background(), pod, client.DryRunAll); err != nil {
			return err.Error()
		}
		return ""
	}, 10*time.Second, 100*time.Millisecond).Should(ContainSubstring("violates PodSecurity"))
	newForeignCluster(t, ns, "c")
	tm := newTerraformMachine(t, ns, "c", "m1", nil)
	waitFor(t, tm, 2*time.Minute, "provisioned under the restricted profile", func(o *captfv1.TerraformMachine) bool {
		if c := conditions.Get(o, captfv1.ApplyJobSucceededCondition); c != nil && c.Reason == captfv1.PodSecurityRefusedReason {
			t.Fatalf("the restricted profile refused the Job's Pods: %s", c.Message)
		}
		return provisioned(o.Status.Initialization)
	})
}

// TestPodRefusalRunningJob: a policy that refuses only the Pods the Job controller creates (the
// dry run's Pod, which no Job owns, passes). The Job exists and has no Pod; within a reconcile
// the object says PodsRefused with the API server's message, read from the Job controller's
// FailedCreate events.
func TestPodRefusalRunningJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := scenario(t)
	name := "capx-test-refuse-job-pods-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				}}},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!has(object.metadata.ownerReferences) || !object.metadata.ownerReferences.exists(r, r.kind == 'Job')",
				Message:    "this namespace admits no Pods of Jobs",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	create(t, policy, binding)
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, binding)
		_ = env.Client.Delete(ctx, policy)
	})
	// The policy is in force once a Job's Pod is refused (policies load asynchronously).
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "probe-", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "batch/v1", Kind: "Job", Name: "probe", UID: "00000000-0000-0000-0000-000000000000",
		}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "probe"}}},
	}
	g.Eventually(func() string {
		err := env.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if err == nil {
			return ""
		}
		return err.Error()
	}, 30*time.Second, 100*time.Millisecond).Should(ContainSubstring("this namespace admits no Pods of Jobs"))

	newForeignCluster(t, ns, "c")
	tm := newTerraformMachine(t, ns, "c", "m1", nil)
	waitFor(t, tm, time.Minute, "the running Job's Pods refused", func(o *captfv1.TerraformMachine) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionFalse, captfv1.PodsRefusedReason)
	})
	msg := conditions.GetMessage(tm, captfv1.ApplyJobSucceededCondition)
	g.Expect(msg).To(ContainSubstring("this namespace admits no Pods of Jobs"))
	list := jobsOf(t, ns, captfv1.KindMachine, "m1")
	g.Expect(list).To(HaveLen(1))
	g.Expect(jobs.Classify(&list[0])).To(Equal(jobs.PhaseActive), "the Job runs, without a Pod")
	g.Expect(msg).To(ContainSubstring("Job " + list[0].Name + " has no Pod"))
	g.Expect(tm.Status.ActiveJob).NotTo(BeNil())
	g.Expect(strings.Count(msg, "\n")).To(BeZero())
}
