package approve

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/cli/captf/objects"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/scheme"
	"github.com/capx-io/capx/internal/testenv"
)

// whoami is a clientset whose SelfSubjectReview says user.
func whoami(user string) *k8sfake.Clientset {
	cs := k8sfake.NewClientset()
	cs.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
			UserInfo: authenticationv1.UserInfo{Username: user}}}, nil
	})
	return cs
}

// pendingPlan is a Pending plan of TerraformCluster web in namespace ns.
func pendingPlan(ns string) *captfv1.TerraformPlan {
	tc := testenv.TerraformCluster(ns, "web", "web", "img")
	owner := objects.Wrap(tc).Owner()
	labels := map[string]string{captfv1.PlanPhaseLabel: string(captfv1.PlanPending)}
	for k, v := range owner.Selector() {
		labels[k] = v
	}
	return &captfv1.TerraformPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-0123456789", Labels: labels},
		Spec: captfv1.TerraformPlanSpec{TargetRef: captfv1.PlanTarget{Kind: "TerraformCluster", Name: "web"}, PlanHash: "p2:aa",
			Reason: captfv1.PlanReasonDestructive},
	}
}

func approveWith(t *testing.T, objs []client.Object, args ...string) (cmdutil.ExitCode, string, string, time.Duration) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	streams, _, out, errOut := cmdutil.TestIOStreams(false)
	f := cmdutil.NewTestFactory(streams, "kubectl captf", nil, c, whoami("alice"), "team-a")
	root := cmdutil.NewRoot(f, "", "")
	root.AddCommand(NewCmd(f, nil))
	start := time.Now()
	code := cmdutil.Execute(root, streams, append([]string{"approve"}, args...))
	return code, out.String(), errOut.String(), time.Since(start)
}

// A paused Cluster applies nothing: approving says so, and --wait returns at once with exit 1
// rather than waiting out its timeout saying the apply goes on.
func TestApprovePausedClusterWaitReturnsAtOnce(t *testing.T) {
	cluster := testenv.Cluster("team-a", "web", "TerraformCluster", "web")
	cluster.Spec.Paused = ptr.To(true)
	tc := testenv.TerraformCluster("team-a", "web", "web", "img")
	code, out, errOut, took := approveWith(t, []client.Object{cluster, tc, pendingPlan("team-a")},
		"web-0123456789", "--yes", "--wait", "--timeout", "20s")
	if code != cmdutil.ExitFound {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, cmdutil.ExitFound, out, errOut)
	}
	if took > 10*time.Second {
		t.Fatalf("--wait waited %s for a paused Cluster", took)
	}
	for _, want := range []string{
		"TerraformPlan web-0123456789 will not apply while Cluster team-a/web has spec.paused: true",
		`kubectl patch cluster web -n team-a --type merge -p '{"spec":{"paused":false}}'`,
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "the apply goes on") {
		t.Errorf("claims an apply goes on:\n%s", errOut)
	}
	if !strings.Contains(out, "approved by alice (Pending; paused: Cluster team-a/web has spec.paused: true)") {
		t.Errorf("stdout: %s", out)
	}
}

// The pause annotation on the object itself does the same; without --wait the approval
// succeeds (exit 0) and says the plan waits for the unpause.
func TestApprovePausedObject(t *testing.T) {
	cluster := testenv.Cluster("team-a", "web", "TerraformCluster", "web")
	tc := testenv.TerraformCluster("team-a", "web", "web", "img")
	tc.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	code, out, errOut, _ := approveWith(t, []client.Object{cluster, tc, pendingPlan("team-a")}, "web-0123456789", "--yes", "-o", "json")
	if code != cmdutil.ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "kubectl annotate terraformcluster web -n team-a cluster.x-k8s.io/paused-") {
		t.Errorf("stderr: %s", errOut)
	}
	if !strings.Contains(out, `"paused": "TerraformCluster team-a/web has the cluster.x-k8s.io/paused annotation"`) {
		t.Errorf("stdout: %s", out)
	}
}

func TestPauseOf(t *testing.T) {
	tc := objects.Wrap(testenv.TerraformCluster("ns", "web", "web", "img"))
	cluster := testenv.Cluster("ns", "web", "TerraformCluster", "web")
	if p := PauseOf(tc, cluster); p != nil {
		t.Fatalf("nothing paused: %v", p)
	}
	if p := PauseOf(tc, nil); p != nil {
		t.Fatalf("no Cluster: %v", p)
	}
	tc.Obj.SetAnnotations(map[string]string{clusterv1.PausedAnnotation: "true"})
	if p := PauseOf(tc, cluster); p == nil || p.ClusterSpec || p.Kind != "TerraformCluster" {
		t.Fatalf("annotation: %v", p)
	}
	cluster.Spec.Paused = ptr.To(true)
	if p := PauseOf(tc, cluster); p == nil || !p.ClusterSpec {
		t.Fatalf("the Cluster's spec.paused comes first: %v", p)
	}
}

// A refusal with -o json still prints the Approval, saying why, and exits 2.
func TestRefusalPrintsJSON(t *testing.T) {
	tp := pendingPlan("team-a")
	tp.Labels[captfv1.PlanPhaseLabel] = string(captfv1.PlanSuperseded)
	code, out, errOut, _ := approveWith(t, []client.Object{testenv.TerraformCluster("team-a", "web", "web", "img"), tp},
		"web-0123456789", "--yes", "-o", "json")
	if code != cmdutil.ExitFailure || !strings.Contains(errOut, "was superseded") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var res Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("no JSON on stdout (%v):\n%s", err, out)
	}
	if res.Kind != "Approval" || res.Phase != captfv1.PlanSuperseded || !strings.Contains(res.Refused, "was superseded by a newer plan") || res.ApprovedBy != "" {
		t.Fatalf("%+v", res)
	}
}

// Completion offers what there is to approve: waiting plans and objects with a pending plan,
// never an applied or superseded plan or an object with nothing pending.
func TestCompletionOffersOnlyWhatWaits(t *testing.T) {
	plan := func(name string, phase captfv1.PlanPhase) *captfv1.TerraformPlan {
		tp := pendingPlan("team-a")
		tp.Name, tp.Labels[captfv1.PlanPhaseLabel] = name, string(phase)
		return tp
	}
	web := testenv.TerraformCluster("team-a", "web", "web", "img")
	web.Status.PendingPlanRef = &corev1.LocalObjectReference{Name: "web-pending"}
	idle := testenv.TerraformCluster("team-a", "idle", "idle", "img")
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(web, idle,
		plan("web-pending", captfv1.PlanPending), plan("web-approved", captfv1.PlanApproved),
		plan("web-applied", captfv1.PlanApplied), plan("web-superseded", captfv1.PlanSuperseded), plan("web-failed", captfv1.PlanFailed)).Build()
	streams, _, out, errOut := cmdutil.TestIOStreams(false)
	f := cmdutil.NewTestFactory(streams, "kubectl captf", nil, c, nil, "team-a")
	root := cmdutil.NewRoot(f, "", "")
	root.AddCommand(NewCmd(f, nil))
	if code := cmdutil.Execute(root, streams, []string{"__complete", "approve", ""}); code != cmdutil.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !strings.HasPrefix(l, ":") {
			got = append(got, l)
		}
	}
	if strings.Join(got, " ") != "web-approved web-pending web" {
		t.Fatalf("completion offers %v", got)
	}
}
