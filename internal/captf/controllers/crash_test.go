package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/leases"
	"github.com/capx-io/capx/internal/testenv/mgrtest"
)

// refuseRunSecrets makes the API server refuse to create per-run Secrets in ns (a failed write,
// as a crash or a quota would leave it) until the returned function lifts the refusal.
func refuseRunSecrets(t *testing.T, ns string) func() {
	t.Helper()
	ctx := context.Background()
	name := "refuse-run-secrets-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
				}}},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!object.metadata.name.startsWith('captf-run-')", Message: "test: run Secrets refused",
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
	lift := func() {
		for _, o := range []client.Object{binding, policy} {
			if err := env.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(lift)
	probe := func(n string) error {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "captf-run-probe-" + n}}
		err := env.Client.Create(ctx, s)
		if err == nil {
			_ = env.Client.Delete(ctx, s)
		}
		return err
	}
	NewWithT(t).Eventually(func() error { return probe("on") }, 30*time.Second, 200*time.Millisecond).Should(HaveOccurred())
	return func() {
		lift()
		NewWithT(t).Eventually(func() error { return probe("off") }, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	}
}

// TestRunSecretBeforeJob (issue 9): a Job is never created before the per-run Secret its Pod
// mounts. While the Secret cannot be written no Job exists (and the run lease is given back);
// once it can, the Job runs with it, and the Secret then belongs to the Job (the garbage
// collector takes it with the Job). No kubelet runs: the Job only needs to exist.
func TestRunSecretBeforeJob(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t)
	lift := refuseRunSecrets(t, ns)
	mgrtest.Start(t, env, "--providers=captf", "--drift-interval=0", "--namespace="+ns)

	tc := newTerraformCluster(t, ns, "c1", nil)
	waitFor(t, tc, time.Minute, "finalizer added", func(o *captfv1.TerraformCluster) bool {
		return len(o.Finalizers) > 0 && o.Status.StateSecretSuffix != ""
	})
	never(t, 5*time.Second, "a Job without its run Secret", func() bool {
		return len(jobsOf(t, ns, captfv1.KindCluster, "c1")) > 0
	})
	owner, err := jobs.OwnerOf(tc, "c1")
	g.Expect(err).NotTo(HaveOccurred())
	// Each retry takes the lease and gives it back when the Secret is refused; a loaded machine
	// can catch one in between, so the lease must be seen gone, not gone at one instant.
	g.Eventually(func() bool {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: leases.RunLeaseName(owner)}, &coordinationv1.Lease{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 100*time.Millisecond).Should(BeTrue(), "the run lease was given back")

	lift()
	annotate(t, tc, "capx.test/touch", ptr.To("1"))
	g.Eventually(func() int { return len(jobsOf(t, ns, captfv1.KindCluster, "c1")) }, time.Minute, 200*time.Millisecond).Should(Equal(1))
	job := jobsOf(t, ns, captfv1.KindCluster, "c1")[0]
	run := &corev1.Secret{}
	g.Eventually(func() []metav1.OwnerReference {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.RunSecretName(job.Name)}, run); err != nil {
			return nil
		}
		return run.OwnerReferences
	}, 30*time.Second, 200*time.Millisecond).Should(ConsistOf(HaveField("UID", job.UID)), "the run Secret belongs to its Job")
	g.Expect(run.Data).To(HaveKey(contract.VarsFile))
}
