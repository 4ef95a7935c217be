package controllers_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
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
	g.Eventually(func() int { return len(jobsOf(t, ns, captfv1.KindCluster, "c1")) }, time.Minute, 200*time.Millisecond).
		To(Equal(1), "c1 runs as captf-runner")
	rb := &rbacv1.RoleBinding{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "captf-runner"}, rb)).To(Succeed())
	g.Expect(rb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "capx-captf-runner"}))
	g.Expect(rb.Subjects).To(Equal([]rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "captf-runner", Namespace: ns}}))
	g.Expect(rb.Labels).To(HaveKeyWithValue(captfv1.ManagedLabel, "true"), "cached from now on: no create per reconcile")
	sa := &corev1.ServiceAccount{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "captf-runner"}, sa)).To(Succeed())
	g.Expect(sa.Labels).To(And(HaveKeyWithValue(captfv1.ManagedLabel, "true"), HaveKeyWithValue(captfv1.RunnerLabel, "true")))

	// The runner's Lease rights stop at the state locks of the namespace's objects (issue 9):
	// its ClusterRole has none, and the manager grants get and update on each lock Lease by name.
	g.Expect(env.Apply(ctx, filepath.Join(env.Root, "config", "rbac", "runner_role.yaml"))).To(Succeed())
	c1Lock := contract.LockLeaseName(contract.StateSuffix(ns, captfv1.KindCluster, "c1"))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: c1Lock}, &coordinationv1.Lease{})).To(Succeed(),
		"the lock Lease is created unlocked, so the runner never creates Leases")
	runner := "system:serviceaccount:" + ns + ":captf-runner"
	g.Eventually(func() bool { return can(t, runner, ns, "update", c1Lock) }, 10*time.Second, 200*time.Millisecond).Should(BeTrue())
	g.Expect(can(t, runner, ns, "get", c1Lock)).To(BeTrue())
	g.Expect(can(t, runner, ns, "update", "some-controller-leader-election")).To(BeFalse())
	g.Expect(can(t, runner, ns, "get", "some-controller-leader-election")).To(BeFalse())
	g.Expect(can(t, runner, ns, "create", "")).To(BeFalse())
	g.Expect(can(t, runner, ns, "delete", c1Lock)).To(BeFalse())

	// Any other account of the namespace needs the opt-in label.
	c2 := newTerraformCluster(t, ns, "c2", func(o *captfv1.TerraformCluster) {
		o.Spec.Jobs = &captfv1.JobPolicy{ServiceAccountName: "deployer"}
	})
	waitFor(t, c2, time.Minute, "refused to run as deployer", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionFalse, captfv1.JobPolicyInvalidReason)
	})
	g.Expect(describe(c2)).To(And(ContainSubstring("deployer"), ContainSubstring("captf.io/runner=true"),
		ContainSubstring("kubectl label serviceaccount deployer -n "+ns)))
	g.Expect(jobsOf(t, ns, captfv1.KindCluster, "c2")).To(BeEmpty())

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
		for _, j := range jobsOf(t, ns, captfv1.KindCluster, "c2") {
			accounts = append(accounts, j.Spec.Template.Spec.ServiceAccountName)
		}
		return accounts
	}, time.Minute, 200*time.Millisecond).Should(Equal([]string{"deployer"}))
	c2Lock := contract.LockLeaseName(contract.StateSuffix(ns, captfv1.KindCluster, "c2"))
	deployer := "system:serviceaccount:" + ns + ":deployer"
	g.Eventually(func() bool { return can(t, deployer, ns, "update", c2Lock) }, 10*time.Second, 200*time.Millisecond).Should(BeTrue())
	g.Expect(can(t, runner, ns, "update", c2Lock)).To(BeTrue(), "the Role lists every lock of the namespace")
}

// can asks the API server's authorizer whether user may do verb on the named Lease in ns.
func can(t *testing.T, user, ns, verb, name string) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Group: coordinationv1.GroupName, Resource: "leases", Name: name,
		},
	}}
	if err := env.Client.Create(context.Background(), sar); err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}
