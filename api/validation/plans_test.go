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

// grant gives user the verbs on terraformplans and terraformplanviews in ns.
func grant(t *testing.T, ns, user string, verbs ...string) {
	t.Helper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plans-" + user},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{captfv1.GroupVersion.Group}, Resources: []string{"terraformplans", "terraformplanviews"}, Verbs: verbs,
		}},
	}
	mustCreate(t, role)
	mustCreate(t, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plans-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})
}

// unlabelled is p without the manager's labels, as anyone but the manager must create it.
func unlabelled(p *captfv1.TerraformPlan) *captfv1.TerraformPlan {
	p.Labels = nil
	return p
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
	grant(t, ns, "mover", "get", "create", "create-approved", "manage")
	tenant, mover := asUser(t, "tenant"), asUser(t, "mover")

	t.Run("not created approved", func(t *testing.T) {
		n := 0
		eventually(t, func() error {
			n++
			p := unlabelled(plan(ns, fmt.Sprintf("forged-%d", n)))
			p.Spec.Approved, p.Spec.ApprovedBy = true, "tenant"
			return tenant.Create(ctx, p)
		}, "a TerraformPlan cannot be created already approved")
		p := unlabelled(plan(ns, "forged-other"))
		p.Spec.Approved, p.Spec.ApprovedBy = true, "alice"
		checkErr(t, tenant.Create(ctx, p), "a TerraformPlan cannot be created already approved")
		checkErr(t, tenant.Create(ctx, unlabelled(plan(ns, "unapproved"))), "")

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
			checkErr(t, tenant.Update(ctx, summary), "the summary and the view digest an approver reviews are the manager's")
			relabel := fresh()
			relabel.Labels[captfv1.PlanPhaseLabel] = string(captfv1.PlanPending)
			checkErr(t, tenant.Update(ctx, relabel), "change")
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

// TestPlanManagerFields (issue 19): what an approver reviews and what the manager trusts of a
// Pending plan is the manager's alone. A user with every plain right on plans cannot rewrite its
// summary or view digest (for anyone: the CRD's rules), set or change its captf.io/ labels (its
// phase, whether it is destructive) or annotations, hand it to another owner, create a plan
// carrying them, or write a TerraformPlanView; they can still approve it and label it for
// themselves. The manager (the custom verb manage) writes them. Each of these passed before.
func TestPlanManagerFields(t *testing.T) {
	ns := env.NewNamespace(t)
	ctx := context.Background()
	grant(t, ns, "approver", "get", "list", "create", "update", "patch", "delete")
	grant(t, ns, "manager", "get", "create", "update", "patch", "manage")
	approver, manager := asUser(t, "approver"), asUser(t, "manager")

	live := plan(ns, "pending")
	live.Labels[captfv1.DestructiveLabel] = "true"
	live.Spec.Summary = captfv1.PlanSummary{Delete: 3, Resources: []string{"terraform_data.db (delete)"}}
	live.Spec.ViewDigest = strings.Repeat("a", 64)
	mustCreate(t, live)
	fresh := func() *captfv1.TerraformPlan {
		t.Helper()
		got := &captfv1.TerraformPlan{}
		if err := approver.Get(ctx, client.ObjectKeyFromObject(live), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	probe := plan(ns, "probe")
	mustCreate(t, probe)
	eventually(t, func() error {
		p := &captfv1.TerraformPlan{}
		if err := approver.Get(ctx, client.ObjectKeyFromObject(probe), p); err != nil {
			return nil
		}
		p.Labels["captf.io/probe"] = p.ResourceVersion
		return approver.Update(ctx, p)
	}, "are the CAPTF manager's")

	for _, tc := range []struct {
		what    string
		edit    func(*captfv1.TerraformPlan)
		wantErr string
	}{
		{"a harmless summary", func(p *captfv1.TerraformPlan) {
			p.Spec.Summary = captfv1.PlanSummary{Update: 1, Resources: []string{"terraform_data.tag (update)"}}
		}, "the summary and the view digest an approver reviews are the manager's"},
		{"another view digest", func(p *captfv1.TerraformPlan) { p.Spec.ViewDigest = strings.Repeat("b", 64) },
			"the summary and the view digest an approver reviews are the manager's"},
		{"a frozen phase", func(p *captfv1.TerraformPlan) { p.Labels[captfv1.PlanPhaseLabel] = string(captfv1.PlanApplied) }, "labels of a TerraformPlan"},
		{"no destructive label", func(p *captfv1.TerraformPlan) { delete(p.Labels, captfv1.DestructiveLabel) }, "labels of a TerraformPlan"},
		{"a manager annotation", func(p *captfv1.TerraformPlan) {
			p.Annotations = map[string]string{"captf.io/plan-view-digest": strings.Repeat("b", 64)}
		}, "annotations of a TerraformPlan"},
		{"another owner", func(p *captfv1.TerraformPlan) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "1234"}}
		}, "owner references of a TerraformPlan"},
		{"a label of the approver's own", func(p *captfv1.TerraformPlan) { p.Labels["team"] = "a" }, ""},
		{"the approval itself", func(p *captfv1.TerraformPlan) { p.Spec.Approved, p.Spec.ApprovedBy = true, "approver" }, ""},
	} {
		t.Run(tc.what, func(t *testing.T) {
			p := fresh()
			tc.edit(p)
			checkErr(t, approver.Update(ctx, p), tc.wantErr)
		})
	}

	t.Run("created with the manager's labels", func(t *testing.T) {
		checkErr(t, approver.Create(ctx, plan(ns, "forged-pending")), "labels of a TerraformPlan")
		checkErr(t, manager.Create(ctx, plan(ns, "recorded")), "")
	})
	t.Run("views are the manager's", func(t *testing.T) {
		view := func(name string) *captfv1.TerraformPlanView {
			return &captfv1.TerraformPlanView{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Plan: "pending", Parts: 1, Digest: strings.Repeat("a", 64), Data: []byte("x")}
		}
		checkErr(t, approver.Create(ctx, view("forged")), "TerraformPlanViews are written by the CAPTF manager only")
		checkErr(t, manager.Create(ctx, view("published")), "")
		v := &captfv1.TerraformPlanView{}
		if err := approver.Get(ctx, client.ObjectKey{Namespace: ns, Name: "published"}, v); err != nil {
			t.Fatal(err)
		}
		v.Data = []byte("y")
		checkErr(t, approver.Update(ctx, v), "TerraformPlanViews are written by the CAPTF manager only")
	})
	t.Run("the manager relabels", func(t *testing.T) {
		p := fresh()
		p.Labels[captfv1.PlanPhaseLabel] = string(captfv1.PlanSuperseded)
		if err := manager.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	})
}
