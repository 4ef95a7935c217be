package captf_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/planview"
	"github.com/capx-io/capx/internal/cli/captf/plan/show"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/testenv/mgrtest"
)

const clusterImage = "capx.test/modules/cluster:v1"

// TestRunbook walks an operator's runbook against the real manager, runner and OpenTofu: a
// destructive change waits, plan show shows the replace from the Secret the runner stored,
// approve --hash --wait applies it as the approving user, backups list and restore --yes --wait
// bring back an earlier serial, and owners check finds stripped owner references that owners
// repair --yes fixes. Every command runs with captured streams; without a terminal nothing is
// coloured and nothing prompts.
func TestRunbook(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t)
	startManager(t, ns)

	settings := map[string]any{"failure_domains": []string{"fd-a"}, "network_cidr": "10.0.0.0/16"}
	cluster := testenv.Cluster(ns, "c1", "TerraformCluster", "c1")
	create(t, cluster)
	tc := testenv.TerraformCluster(ns, "c1", "c1", clusterImage)
	tc.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "c1", UID: cluster.UID, Controller: ptr.To(true)}}
	tc.Spec.Variables = vars(settings)
	create(t, tc)
	mgrtest.WaitFor(t, env, tc, 3*time.Minute, "provisioned", func(o *captfv1.TerraformCluster) bool {
		return ptr.Deref(o.Status.Initialization.Provisioned, false) && o.Status.ActiveJob == nil && o.Status.ObservedStateSerial != nil
	})

	// status: a tree with the TerraformCluster, plain text without a terminal.
	r := run(t, ns, runOpts{}, "status", "c1")
	g.Expect(r.code).To(Equal(cmdutil.ExitOK), r.String())
	g.Expect(r.out).To(ContainSubstring("Cluster/c1"))
	g.Expect(r.out).To(MatchRegexp(`└─TerraformCluster/c1\s+True`))
	noEscapes(t, r)

	// A new CIDR replaces the network: the guard stops the apply and the plan waits.
	settings["network_cidr"] = "10.1.0.0/16"
	patch := client.MergeFrom(tc.DeepCopy())
	tc.Spec.Variables = vars(settings)
	g.Expect(env.Client.Patch(ctx, tc, patch)).To(Succeed())
	mgrtest.WaitFor(t, env, tc, 3*time.Minute, "a destructive plan waiting", func(o *captfv1.TerraformCluster) bool {
		return o.Status.PendingPlanRef != nil && o.Status.ActiveJob == nil
	})
	planName := tc.Status.PendingPlanRef.Name

	r = run(t, ns, runOpts{}, "plan", "list")
	g.Expect(r.code).To(Equal(cmdutil.ExitOK), r.String())
	g.Expect(r.out).To(MatchRegexp(planName + `\s+TerraformCluster/c1\s+Pending\s+Destructive`))

	// plan show: by the object, diff-style exit 1, the replace first with its forcing attribute.
	r = run(t, ns, runOpts{}, "plan", "show", "c1")
	g.Expect(r.code).To(Equal(cmdutil.ExitFound), r.String())
	g.Expect(r.out).To(ContainSubstring("Replace (1)"))
	g.Expect(r.out).To(ContainSubstring("-/+ module.role.terraform_data.network"))
	g.Expect(r.out).To(ContainSubstring(`~ triggers_replace[0]: "10.0.0.0/16" -> "10.1.0.0/16"  # forces replacement`))
	g.Expect(strings.Index(r.out, "Replace (1)")).To(BeNumerically("<", strings.Index(r.out, "Update in place")))
	noEscapes(t, r)
	var view show.Plan
	run(t, ns, runOpts{}, "plan", "show", planName, "-o", "json").decode(t, &view)
	g.Expect(view.Kind).To(Equal("PlanView"))
	g.Expect(view.APIVersion).To(Equal(cmdutil.APIVersion))
	g.Expect(view.ViewAvailable).To(BeTrue(), view.ViewProblem)
	g.Expect(view.Changes[0].Action).To(Equal(planview.ActionReplace))
	g.Expect(view.Reason).To(Equal(captfv1.PlanReasonDestructive))
	// The published view belongs to its TerraformPlan and moves with it: it carries the
	// owner's labels and clusterctl's move label.
	vs := &captfv1.TerraformPlanView{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: planview.SecretName(planName)}, vs)).To(Succeed())
	g.Expect(vs.Labels).To(HaveKey("clusterctl.cluster.x-k8s.io/move"))
	g.Expect(vs.OwnerReferences).To(ConsistOf(And(HaveField("Kind", "TerraformPlan"), HaveField("Name", planName))))

	// approve refuses a hash that is not the plan's, and refuses to act without a terminal
	// unless told to.
	r = run(t, ns, runOpts{user: "alice"}, "approve", "c1", "--hash", "p2:0000")
	g.Expect(r.code).To(Equal(cmdutil.ExitFailure), r.String())
	g.Expect(r.errOut).To(ContainSubstring("not the one you reviewed"))
	r = run(t, ns, runOpts{user: "alice"}, "approve", "c1")
	g.Expect(r.code).To(Equal(cmdutil.ExitUsage), r.String())
	g.Expect(r.errOut).To(ContainSubstring("--yes"))
	// On a terminal, "no" changes nothing.
	r = run(t, ns, runOpts{user: "alice", tty: true, stdin: "n\n"}, "approve", "c1")
	g.Expect(r.code).To(Equal(cmdutil.ExitCancelled), r.String())
	g.Expect(r.errOut).To(ContainSubstring("[y/N]"))
	g.Expect(r.errOut).To(ContainSubstring("\x1b["), "coloured on a terminal")

	// approve --hash --wait: approved as alice (SelfSubjectReview), applied.
	r = run(t, ns, runOpts{user: "alice"}, "approve", planName, "--hash", view.PlanHash, "--wait", "--timeout", "3m", "-o", "json")
	g.Expect(r.code).To(Equal(cmdutil.ExitOK), r.String())
	var approval struct {
		ApprovedBy string            `json:"approvedBy"`
		Phase      captfv1.PlanPhase `json:"phase"`
	}
	r.decode(t, &approval)
	g.Expect(approval.ApprovedBy).To(Equal("alice"))
	g.Expect(approval.Phase).To(Equal(captfv1.PlanApplied))
	g.Expect(r.errOut).To(ContainSubstring("Applied"))
	// Approving an applied plan is refused with what to do.
	r = run(t, ns, runOpts{user: "alice"}, "approve", planName, "--yes")
	g.Expect(r.code).To(Equal(cmdutil.ExitFailure), r.String())
	g.Expect(r.errOut).To(ContainSubstring("already applied"))

	// backups: every serial was backed up; restore the first one.
	mgrtest.WaitFor(t, env, tc, time.Minute, "two backups", func(o *captfv1.TerraformCluster) bool { return len(o.Status.StateBackups) >= 2 })
	var backups struct {
		Current *struct {
			Serial int64 `json:"serial"`
		} `json:"current"`
		Backups []struct {
			Serial     int64 `json:"serial"`
			Restorable bool  `json:"restorable"`
		} `json:"backups"`
	}
	run(t, ns, runOpts{}, "backups", "list", "tfc/c1", "-o", "json").decode(t, &backups)
	g.Expect(backups.Current).NotTo(BeNil())
	oldest := backups.Backups[len(backups.Backups)-1]
	g.Expect(oldest.Restorable).To(BeTrue())
	g.Expect(oldest.Serial).To(BeNumerically("<", backups.Current.Serial))
	serial := strconv.FormatInt(oldest.Serial, 10)

	r = run(t, ns, runOpts{}, "backups", "restore", "c1", "--serial", "999")
	g.Expect(r.code).To(Equal(cmdutil.ExitFound), r.String())
	g.Expect(r.out).To(ContainSubstring("FAIL  backup complete"))
	r = run(t, ns, runOpts{}, "backups", "restore", "c1", "--serial", serial, "--dry-run")
	g.Expect(r.code).To(Equal(cmdutil.ExitOK), r.String())
	g.Expect(r.out).To(ContainSubstring("PASS  same lineage"))
	g.Expect(r.out).To(ContainSubstring("(dry run) would annotate"))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tc), tc)).To(Succeed())
	g.Expect(tc.Annotations).NotTo(HaveKey(captfv1.RestoreStateAnnotation), "a dry run requests nothing")
	r = run(t, ns, runOpts{}, "backups", "restore", "c1", "--serial", serial)
	g.Expect(r.code).To(Equal(cmdutil.ExitUsage), r.String())
	r = run(t, ns, runOpts{}, "backups", "restore", "c1", "--serial", serial, "--yes", "--wait", "--timeout", "3m")
	g.Expect(r.code).To(Equal(cmdutil.ExitOK), r.String())
	g.Expect(r.out).To(ContainSubstring("Restored"))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tc), tc)).To(Succeed())
	g.Expect(tc.Status.LastRestoredSerial).To(Equal(ptr.To(oldest.Serial)))

	// owners: strip the owner references of the backups, as a restore from an external backup
	// would leave them, while the object is paused: the manager re-owns them itself on its next
	// pass, but never while paused (during clusterctl move, say), which is when an operator
	// checks and repairs them with the plugin.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tc), tc)).To(Succeed())
	pause := client.MergeFrom(tc.DeepCopy())
	tc.Annotations[clusterv1.PausedAnnotation] = ""
	g.Expect(env.Client.Patch(ctx, tc, pause)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tc), tc)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(tc.Status.Conditions, clusterv1.PausedCondition)).To(BeTrue())
	}).WithTimeout(time.Minute).Should(Succeed())
	var secrets corev1.SecretList
	g.Expect(env.Client.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{captfv1.StateBackupLabel: "true"})).To(Succeed())
	g.Expect(secrets.Items).NotTo(BeEmpty())
	for i := range secrets.Items {
		s := &secrets.Items[i]
		p := client.MergeFrom(s.DeepCopy())
		s.OwnerReferences = nil
		g.Expect(env.Client.Patch(ctx, s, p)).To(Succeed())
	}
	r = run(t, ns, runOpts{}, "owners", "check", "c1")
	g.Expect(r.code).To(Equal(cmdutil.ExitFound), r.String())
	g.Expect(strings.Count(r.out, "BROKEN")).To(BeNumerically(">=", len(secrets.Items)))
	g.Expect(r.out).To(ContainSubstring("(state backup of TerraformCluster/c1): no owner reference"))
	r = run(t, ns, runOpts{}, "owners", "repair", "c1")
	g.Expect(r.code).To(Equal(cmdutil.ExitFound), r.String())
	g.Expect(r.out).To(ContainSubstring("dry run"))
	r = run(t, ns, runOpts{}, "owners", "repair", "c1", "--yes")
	g.Expect(r.code).To(Equal(cmdutil.ExitOK), r.String())
	g.Expect(r.out).To(ContainSubstring("FIXED"))
	r = run(t, ns, runOpts{}, "owners", "check", "c1")
	g.Expect(r.code).To(Equal(cmdutil.ExitOK), r.String())
	for i := range secrets.Items {
		s := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&secrets.Items[i]), s)).To(Succeed())
		g.Expect(s.OwnerReferences).To(ConsistOf(HaveField("UID", tc.UID)))
	}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tc), tc)).To(Succeed())
	unpause := client.MergeFrom(tc.DeepCopy())
	delete(tc.Annotations, clusterv1.PausedAnnotation)
	g.Expect(env.Client.Patch(ctx, tc, unpause)).To(Succeed())

	// status -o json: the versioned shape.
	var st struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Clusters   []struct {
			Name    string `json:"name"`
			Found   bool   `json:"found"`
			Objects []struct {
				Kind    string `json:"kind"`
				Backups int    `json:"backups"`
			} `json:"objects"`
		} `json:"clusters"`
	}
	run(t, ns, runOpts{}, "status", "-o", "json").decode(t, &st)
	g.Expect(st.Kind).To(Equal("ClusterStatus"))
	g.Expect(st.Clusters).To(HaveLen(1))
	g.Expect(st.Clusters[0].Found).To(BeTrue())
	g.Expect(st.Clusters[0].Objects[0].Backups).To(BeNumerically(">=", 2))
}
