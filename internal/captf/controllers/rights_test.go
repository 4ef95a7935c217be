package controllers_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/testenv/mgrtest"
)

// The manager's identity as config/rbac/role_binding.yaml binds it.
const managerUser = "system:serviceaccount:capx-system:capx-manager"

var managerRole sync.Once

// asManager is the manager's ServiceAccount holding exactly the rights the release gives it
// (config/rbac: its ClusterRole and ClusterRoleBinding; the namespace role it binds itself).
func asManager(t *testing.T) *rest.Config {
	t.Helper()
	var err error
	managerRole.Do(func() {
		for _, f := range []string{"role.yaml", "role_binding.yaml", "namespace_role.yaml", "runner_role.yaml"} {
			if err = env.Apply(context.Background(), filepath.Join(env.Root, "config", "rbac", f)); err != nil {
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: managerUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:capx-system", "system:authenticated"}}
	return cfg
}

// TestManagerRunsWithItsOwnRights (issue 19): the manager's ClusterRole amounted to
// cluster-admin (Pods, Jobs, Secrets, ServiceAccounts, Roles and RoleBindings written anywhere).
// Now it writes in a namespace only through the RoleBinding it keeps there to
// capx-captf-namespace: a SubjectAccessReview table shows what it may do where, and the real
// manager, run as its own ServiceAccount with exactly the shipped roles, provisions a cluster and
// a machine, and destroys them from their destroy namespace when their namespace is deleted.
func TestManagerRunsWithItsOwnRights(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cfg := asManager(t)
	t.Parallel()
	ns, other := env.NewNamespace(t), env.NewNamespace(t)

	can := func(namespace, verb, group, resource, name string) bool {
		t.Helper()
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: managerUser, Groups: cfg.Impersonate.Groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: group, Resource: resource, Name: name},
		}}
		g.Expect(env.Client.Create(ctx, sar)).To(Succeed())
		return sar.Status.Allowed
	}
	type right struct {
		namespace, verb, group, resource, name string
		allowed                                bool
	}
	// Before the manager met any object: nothing written anywhere but its own kinds.
	before := []right{
		{ns, "create", "batch", "jobs", "", false},
		{ns, "create", "", "pods", "", false},
		{ns, "create", "", "secrets", "", false},
		{ns, "delete", "", "secrets", "", false},
		{ns, "create", "", "serviceaccounts", "", false},
		{ns, "create", "rbac.authorization.k8s.io", "roles", "", false},
		{ns, "update", "coordination.k8s.io", "leases", "", false},
		{"kube-system", "create", "", "secrets", "", false},
		{"kube-system", "create", "batch", "jobs", "", false},
		{"", "bind", "rbac.authorization.k8s.io", "clusterroles", "cluster-admin", false},
		{"", "bind", "rbac.authorization.k8s.io", "clusterroles", "edit", false},
		{"", "escalate", "rbac.authorization.k8s.io", "clusterroles", "", false},
		{"", "update", "", "namespaces", "", false},
		{"", "create", "rbac.authorization.k8s.io", "clusterrolebindings", "", false},
		// What stays cluster-wide, each documented in docs/captf/security.md.
		{ns, "list", "", "secrets", "", true},
		{ns, "create", "rbac.authorization.k8s.io", "rolebindings", "", true},
		{"", "bind", "rbac.authorization.k8s.io", "clusterroles", "capx-captf-namespace", true},
		{"", "bind", "rbac.authorization.k8s.io", "clusterroles", "capx-captf-runner", true},
		{ns, "create", "infrastructure.cluster.x-k8s.io", "terraformplans", "", true},
		{ns, "manage", "infrastructure.cluster.x-k8s.io", "terraformplans", "", true},
	}
	for _, r := range before {
		g.Expect(can(r.namespace, r.verb, r.group, r.resource, r.name)).To(Equal(r.allowed), "%s %s/%s %s in %q", r.verb, r.group, r.resource, r.name, r.namespace)
	}

	kubelet := env.StartKubeletIn(t, ns, moduleImages)
	mgrtest.StartWith(t, env, cfg, "--providers=captf", "--drift-interval=0", "--namespace="+ns, "--destroy-namespace-prefix="+destroyPrefix)
	dest := destroyNamespaceOf(t, ns)
	elsewhere := env.StartKubeletIn(t, dest, moduleImages)
	tc := newTerraformCluster(t, ns, "c", nil)
	waitFor(t, tc, 2*time.Minute, "provisioned", func(o *captfv1.TerraformCluster) bool { return provisioned(o.Status.Initialization) })
	tm := newTerraformMachine(t, ns, "c", "m1", nil)
	waitFor(t, tm, 2*time.Minute, "the machine provisioned", func(o *captfv1.TerraformMachine) bool { return provisioned(o.Status.Initialization) })
	g.Expect(kubelet.Log.String()).To(ContainSubstring("apply succeeded"))

	// It bound itself in this namespace, and nowhere else.
	rb := &rbacv1.RoleBinding{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "capx-manager"}, rb)).To(Succeed())
	g.Expect(rb.RoleRef.Name).To(Equal("capx-captf-namespace"))
	g.Expect(rb.Subjects).To(ConsistOf(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "capx-system", Name: "capx-manager"}))
	for _, r := range []right{
		{ns, "create", "batch", "jobs", "", true},
		{ns, "create", "", "pods", "", true},
		{ns, "delete", "", "secrets", "", true},
		{other, "create", "batch", "jobs", "", false},
		{other, "create", "", "pods", "", false},
		{other, "create", "", "secrets", "", false},
		{"kube-system", "create", "", "pods", "", false},
	} {
		g.Expect(can(r.namespace, r.verb, r.group, r.resource, r.name)).To(Equal(r.allowed), "%s %s/%s in %q", r.verb, r.group, r.resource, r.namespace)
	}

	// Its namespace is deleted: the copies destroy from the destroy namespace it makes, and
	// everything goes, its RoleBindings too.
	deleteNamespace(t, ns)
	gone(t, tm, 3*time.Minute)
	gone(t, tc, 3*time.Minute)
	gone(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, 3*time.Minute)
	gone(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dest}}, 2*time.Minute)
	g.Expect(elsewhere.Log.String()).To(MatchRegexp(`Destroy complete! Resources: [1-9][0-9]* destroyed`))
	g.Expect(kubelet.Log.String()).NotTo(ContainSubstring("-destroy-"), "nothing ran in the terminating namespace")
}
