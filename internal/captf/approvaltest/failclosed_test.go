package approvaltest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/testenv/mgrtest"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{ControllerManager: true}, &env))
}

// TestApprovalsFailClosed (issue 19): approvals rest on the captf-plan-approval and
// captf-plan-manager-fields admission policies. With a binding deleted, or a policy weakened, an
// approved plan does not apply: it waits with ApplyJobSucceeded=False/ApprovalsNotEnforced and a
// Warning naming what is missing; put back, the approval is honoured and the plan applies. Before,
// the manager applied whatever was approved, whether or not the API server checked who approved.
func TestApprovalsFailClosed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t)
	env.StartKubeletIn(t, ns, func(string) (string, error) { return filepath.Join(env.Root, "test", "modules", "cluster"), nil })
	mgrtest.Start(t, env, "--providers=captf", "--drift-interval=0", "--namespace="+ns, "--destroy-namespace-prefix=")

	cluster := testenv.Cluster(ns, "c1", "TerraformCluster", "c1")
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	tc := testenv.TerraformCluster(ns, "c1", "c1", "capx.test/modules/cluster:v1")
	tc.Spec.ApplyPolicy = captfv1.ApplyPolicyManual
	tc.OwnerReferences = ownedByCluster(cluster.Name, string(cluster.UID))
	g.Expect(env.Client.Create(ctx, tc)).To(Succeed())
	mgrtest.WaitFor(t, env, tc, 2*time.Minute, "provisioned", func(o *captfv1.TerraformCluster) bool {
		return ptr.Deref(o.Status.Initialization.Provisioned, false) && o.Status.ActiveJob == nil
	})

	for i, tamper := range []struct {
		what string
		do   func() (restore func())
		says string
	}{
		{"the approval policy's binding deleted", func() func() {
			b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "captf-plan-approval"}, b)).To(Succeed())
			g.Expect(env.Client.Delete(ctx, b)).To(Succeed())
			return func() { reinstall(t) }
		}, "no ValidatingAdmissionPolicyBinding makes captf-plan-approval deny"},
		{"the manager-fields policy weakened", func() func() {
			p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "captf-plan-manager-fields"}, p)).To(Succeed())
			for i := range p.Spec.Validations {
				p.Spec.Validations[i].Expression = "true"
			}
			g.Expect(env.Client.Update(ctx, p)).To(Succeed())
			return func() { reinstall(t) }
		}, "the ValidatingAdmissionPolicy captf-plan-manager-fields is not the one this manager ships (its validations differ)"},
	} {
		t.Run(tamper.what, func(t *testing.T) {
			g := NewWithT(t)
			plan := pendingChange(t, tc, fmt.Sprintf("fd-%d", i))
			restore := tamper.do()
			alice := env.As(t, "alice")
			approved := false
			applies := func() int { return countJobs(t, ns, "apply") }
			before := applies()
			g.Eventually(func() error {
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(plan), plan); err != nil {
					return err
				}
				if approved {
					return nil
				}
				plan.Spec.Approved, plan.Spec.ApprovedBy = true, "alice"
				err := alice.Update(ctx, plan)
				approved = err == nil
				return err
			}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
			mgrtest.WaitFor(t, env, tc, time.Minute, "the approval not honoured", func(o *captfv1.TerraformCluster) bool {
				c := conditions.Get(o, captfv1.ApplyJobSucceededCondition)
				return c != nil && c.Reason == captfv1.ApprovalsNotEnforcedReason && strings.Contains(c.Message, tamper.says)
			})
			g.Expect(applies()).To(Equal(before), "nothing applied while approvals are not enforced")
			g.Expect(warnings(t, ns)).To(ContainElement(ContainSubstring(tamper.says)))

			restore()
			mgrtest.WaitFor(t, env, tc, 2*time.Minute, "the approved plan applied once the policies are back", func(o *captfv1.TerraformCluster) bool {
				return o.Status.PendingPlanRef == nil && o.Status.ActiveJob == nil && applies() > before
			})
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(plan), plan)).To(Succeed())
			g.Expect(plan.Labels[captfv1.PlanPhaseLabel]).To(Equal(string(captfv1.PlanApplied)))
		})
	}
}

// reinstall puts the shipped admission policies back and waits until they are enforced.
func reinstall(t *testing.T) {
	t.Helper()
	if err := env.Apply(context.Background(), filepath.Join(env.Root, "config", "admission")); err != nil {
		t.Fatal(err)
	}
}

// pendingChange changes the cluster's failure domains and returns the plan that waits for
// approval.
func pendingChange(t *testing.T, tc *captfv1.TerraformCluster, failureDomain string) *captfv1.TerraformPlan {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tc), tc)).To(Succeed())
	patch := client.MergeFrom(tc.DeepCopy())
	raw, _ := json.Marshal([]string{failureDomain})
	tc.Spec.Variables = map[string]apiextensionsv1.JSON{"failure_domains": {Raw: raw}}
	g.Expect(env.Client.Patch(ctx, tc, patch)).To(Succeed())
	mgrtest.WaitFor(t, env, tc, 2*time.Minute, "a plan awaiting approval", func(o *captfv1.TerraformCluster) bool {
		return o.Status.PendingPlanRef != nil && o.Status.ActiveJob == nil
	})
	plan := &captfv1.TerraformPlan{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: tc.Status.PendingPlanRef.Name}, plan)).To(Succeed())
	return plan
}

func ownedByCluster(name, uid string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: name, UID: types.UID(uid), Controller: ptr.To(true)}}
}

// countJobs counts the namespace's CAPTF Jobs of an operation.
func countJobs(t *testing.T, ns, op string) int {
	t.Helper()
	list := &batchv1.JobList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{captfv1.OperationLabel: op}); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// warnings are the messages of the namespace's Warning Events.
func warnings(t *testing.T, ns string) []string {
	t.Helper()
	list := &corev1.EventList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Type == corev1.EventTypeWarning {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}
