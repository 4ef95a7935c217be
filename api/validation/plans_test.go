package validation_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// asUser returns a client for a user with only the RBAC rights granted in the test (no
// system:masters), so the policy's authorizer check sees real rights.
func asUser(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// grant gives user the verbs on terraformplans in ns.
func grant(t *testing.T, ns, user string, verbs ...string) {
	t.Helper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plans-" + user},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{captfv1.GroupVersion.Group}, Resources: []string{"terraformplans"}, Verbs: verbs,
		}},
	}
	mustCreate(t, role)
	mustCreate(t, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plans-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})
}

func plan(ns, name string) *captfv1.TerraformPlan {
	return &captfv1.TerraformPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{captfv1.PlanPhaseLabel: "Pending"}},
		Spec: captfv1.TerraformPlanSpec{
			TargetRef: captfv1.PlanTarget{Kind: "TerraformCluster", Name: "c1"},
			PlanHash:  "p2:abc", InputsHash: "h2:def", Reason: captfv1.PlanReasonManual,
		},
	}
}

// eventually retries an admission check while the API server starts enforcing a new policy.
func eventually(t *testing.T, try func() error, wantErr string) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err = try(); err != nil {
			break
		}
	}
	checkErr(t, err, wantErr)
}

// TestPlanAdmission (issue 9): whoever may create TerraformPlans cannot create one already
// approved, in anyone's name, unless they hold create-approved (clusterctl move as an
// administrator); a plan that has ended cannot be approved, and neither its summary nor its
// labels can change, whoever asks; it can still be deleted.
func TestPlanAdmission(t *testing.T) {
	ns := env.NewNamespace(t)
	ctx := context.Background()
	grant(t, ns, "tenant", "get", "create", "update", "patch", "delete")
	grant(t, ns, "mover", "get", "create", "create-approved")
	tenant, mover := asUser(t, "tenant"), asUser(t, "mover")

	t.Run("not created approved", func(t *testing.T) {
		n := 0
		eventually(t, func() error {
			n++
			p := plan(ns, fmt.Sprintf("forged-%d", n))
			p.Spec.Approved, p.Spec.ApprovedBy = true, "tenant"
			return tenant.Create(ctx, p)
		}, "a TerraformPlan cannot be created already approved")
		p := plan(ns, "forged-other")
		p.Spec.Approved, p.Spec.ApprovedBy = true, "alice"
		checkErr(t, tenant.Create(ctx, p), "a TerraformPlan cannot be created already approved")
		checkErr(t, tenant.Create(ctx, plan(ns, "unapproved")), "")

		moved := plan(ns, "moved")
		moved.Spec.Approved, moved.Spec.ApprovedBy = true, "alice"
		checkErr(t, mover.Create(ctx, moved), "")
	})

	t.Run("terminal plans are frozen", func(t *testing.T) {
		for _, phase := range []captfv1.PlanPhase{captfv1.PlanApplied, captfv1.PlanSuperseded, captfv1.PlanFailed} {
			p := plan(ns, "ended-"+strings.ToLower(string(phase)))
			p.Labels[captfv1.PlanPhaseLabel] = string(phase)
			mustCreate(t, p)
			fresh := func() *captfv1.TerraformPlan {
				t.Helper()
				got := &captfv1.TerraformPlan{}
				if err := tenant.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
					t.Fatal(err)
				}
				return got
			}
			approve := fresh()
			approve.Spec.Approved, approve.Spec.ApprovedBy = true, "tenant"
			checkErr(t, tenant.Update(ctx, approve), "has ended ("+string(phase)+")")
			summary := fresh()
			summary.Spec.Summary.Resources = []string{"null_resource.harmless (update)"}
			checkErr(t, tenant.Update(ctx, summary), "its spec and labels cannot change")
			relabel := fresh()
			relabel.Labels[captfv1.PlanPhaseLabel] = string(captfv1.PlanPending)
			checkErr(t, tenant.Update(ctx, relabel), "its spec and labels cannot change")
			checkErr(t, env.Client.Update(ctx, relabel), "its spec and labels cannot change")
			checkErr(t, tenant.Delete(ctx, fresh()), "")
		}

		// The status alone says so too (a plan recorded before the phase label existed).
		p := plan(ns, "ended-by-status")
		delete(p.Labels, captfv1.PlanPhaseLabel)
		mustCreate(t, p)
		p.Status.Phase = captfv1.PlanApplied
		checkErr(t, env.Client.Status().Update(ctx, p), "")
		p.Spec.Approved, p.Spec.ApprovedBy = true, "tenant"
		checkErr(t, tenant.Update(ctx, p), "has ended (Applied)")
	})

	t.Run("live plans can be approved", func(t *testing.T) {
		p := plan(ns, "live")
		mustCreate(t, p)
		p.Spec.Approved, p.Spec.ApprovedBy = true, "tenant"
		checkErr(t, tenant.Update(ctx, p), "")
	})
}
