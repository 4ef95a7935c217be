package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/testenv/mgrtest"
)

// TestRunnerAccounts (issue 9): a Job runs only as a ServiceAccount labelled
// captf.io/runner=true, checked live when the Job would start (JobPolicyInvalid otherwise); the
// manager's own captf-runner account and RoleBinding are taken over when found unlabelled, and
// a RoleBinding of that name that binds another role or other subjects is put right. No kubelet
// runs: the Jobs only need to be created.
func TestRunnerAccounts(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t)
	create(t,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "captf-runner"}},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "captf-runner"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects: []rbacv1.Subject{
				{Kind: rbacv1.ServiceAccountKind, Name: "captf-runner", Namespace: ns},
				{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns},
			},
		},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"}},
	)
	mgrtest.Start(t, env, "--providers=captf", "--drift-interval=0", "--namespace="+ns)

	newTerraformCluster(t, ns, "c1", nil)
	g.Eventually(func() int { return len(jobsOf(t, ns, contract.KindCluster, "c1")) }, time.Minute, 200*time.Millisecond).
		To(Equal(1), "c1 runs as captf-runner")
	rb := &rbacv1.RoleBinding{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "captf-runner"}, rb)).To(Succeed())
	g.Expect(rb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "capx-captf-runner"}))
	g.Expect(rb.Subjects).To(Equal([]rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "captf-runner", Namespace: ns}}))
	g.Expect(rb.Labels).To(HaveKeyWithValue(captfv1.ManagedLabel, "true"), "cached from now on: no create per reconcile")
	sa := &corev1.ServiceAccount{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "captf-runner"}, sa)).To(Succeed())
	g.Expect(sa.Labels).To(And(HaveKeyWithValue(captfv1.ManagedLabel, "true"), HaveKeyWithValue(captfv1.RunnerLabel, "true")))

	// Any other account of the namespace needs the opt-in label.
	c2 := newTerraformCluster(t, ns, "c2", func(o *captfv1.TerraformCluster) {
		o.Spec.Jobs = &captfv1.JobPolicy{ServiceAccountName: "deployer"}
	})
	waitFor(t, c2, time.Minute, "refused to run as deployer", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionFalse, captfv1.JobPolicyInvalidReason)
	})
	g.Expect(describe(c2)).To(And(ContainSubstring("deployer"), ContainSubstring("captf.io/runner=true"),
		ContainSubstring("kubectl label serviceaccount deployer -n "+ns)))
	g.Expect(jobsOf(t, ns, contract.KindCluster, "c2")).To(BeEmpty())

	c3 := newTerraformCluster(t, ns, "c3", func(o *captfv1.TerraformCluster) {
		o.Spec.Jobs = &captfv1.JobPolicy{ServiceAccountName: "nobody"}
	})
	waitFor(t, c3, time.Minute, "refused to run as a missing account", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionFalse, captfv1.JobPolicyInvalidReason)
	})
	g.Expect(describe(c3)).To(ContainSubstring("does not exist"))

	// Labelled, it is used (ServiceAccounts are not watched: the touch saves the minute).
	sa = &corev1.ServiceAccount{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "deployer"}, sa)).To(Succeed())
	update(t, sa, func(o *corev1.ServiceAccount) { o.Labels = map[string]string{captfv1.RunnerLabel: "true"} })
	annotate(t, c2, "capx.test/touch", ptr.To("1"))
	g.Eventually(func() []string {
		var accounts []string
		for _, j := range jobsOf(t, ns, contract.KindCluster, "c2") {
			accounts = append(accounts, j.Spec.Template.Spec.ServiceAccountName)
		}
		return accounts
	}, time.Minute, 200*time.Millisecond).Should(Equal([]string{"deployer"}))
}
