// Package approve is `kubectl captf approve PLAN|OBJECT`: approve a pending plan as the caller,
// optionally only a given hash, and optionally follow its apply to the end.
package approve

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/cli/captf/objects"
	"github.com/capx-io/capx/internal/cli/captf/plan/show"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// Options are the command's inputs.
type Options struct {
	cmdutil.Deps
	Styles *cmdutil.Styles

	Arg      string
	Hash     string
	Yes      bool
	Wait     bool
	Timeout  time.Duration
	Interval time.Duration
	Output   cmdutil.Format
}

// NewCmd returns the command; runF replaces run in tests.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Deps: f.Deps(), Interval: 2 * time.Second}
	cmd := &cobra.Command{
		Use:   "approve PLAN|OBJECT",
		Short: "Approve a pending plan as yourself, and optionally wait for its apply",
		Long: `Approve a TerraformPlan (by name, or the pending plan of a TerraformCluster, TerraformMachinePool
or TerraformMachine) as the user the API server authenticates you as (a SelfSubjectReview, what
"kubectl auth whoami" shows); the captf-plan-approval admission policy refuses any other name.
The summary is shown first; on a terminal you confirm, elsewhere pass --yes or --hash.

--hash approves only a plan with exactly that hash, so a script approves what was reviewed and
never a newer plan. A superseded, applied or failed plan is refused with what to do instead.
--wait follows the apply until the plan is Applied (exit 0) or Failed (exit 2).

A plan whose object is paused (the cluster.x-k8s.io/paused annotation) or whose Cluster is
(spec.paused, as clusterctl move sets it) is approved, but the manager applies nothing until it
is unpaused: the command says so, and --wait returns at once with exit 1 instead of waiting.

Exit codes: 0 approved (and applied, with --wait), 1 approved but paused (with --wait: nothing
was applied), 2 refused or failed, 3 bad usage or neither --yes nor --hash without a terminal,
4 answered no.`,
		Example: fmt.Sprintf(`  # review, then approve the pending plan of a cluster and follow the apply
  %[1]s plan show my-cluster -n team-a
  %[1]s approve my-cluster -n team-a --wait

  # in a script: approve exactly the plan that was reviewed
  %[1]s approve my-cluster-4f2a9c01de -n team-a --hash p2:6d1f... --wait --timeout 30m`, f.Name),
		Args:              cmdutil.ExactArgs(1),
		ValidArgsFunction: cmdutil.CompleteMatching(f, 1, Approvable, append([]client.ObjectList{&captfv1.TerraformPlanList{}}, objects.Lists()...)...),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Arg = args[0]
			opts.Styles = f.ErrStyles()
			if runF != nil {
				return runF(opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Hash, "hash", "", "Approve only if the plan's hash is exactly this (p2:...).")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "Approve without asking.")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "Wait until the approved plan is applied (or fails).")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 30*time.Minute, "How long --wait waits.")
	cmdutil.AddOutputFlag(cmd, &opts.Output)
	return cmd
}

// Result is the printed shape (kind Approval).
type Result struct {
	cmdutil.TypeMeta `json:",inline"`
	Plan             string             `json:"plan"`
	Namespace        string             `json:"namespace"`
	Target           captfv1.PlanTarget `json:"target"`
	PlanHash         string             `json:"planHash"`
	ApprovedBy       string             `json:"approvedBy"`
	// AlreadyApproved is true when the plan was approved before this command (by the caller).
	AlreadyApproved bool `json:"alreadyApproved,omitempty"`
	// Phase is the plan's phase when the command ended (Applied after a successful --wait).
	Phase captfv1.PlanPhase `json:"phase"`
	// Paused says what keeps the approved plan from applying (the target's pause annotation or
	// its Cluster's spec.paused); empty when nothing does.
	Paused string `json:"paused,omitempty"`
	// Refused says why the plan was not approved (approvedBy is then whoever approved it
	// before, if anyone); empty when it was approved.
	Refused string `json:"refused,omitempty"`
}

// Approvable reports whether completion offers o to approve: a TerraformPlan that waits
// (Pending) or is being applied (Approved, which --wait follows), or a CAPTF object with a
// pending plan.
func Approvable(o client.Object) bool {
	if tp, ok := o.(*captfv1.TerraformPlan); ok {
		p := objects.Phase(tp)
		return p == captfv1.PlanPending || p == captfv1.PlanApproved
	}
	return objects.Wrap(o).Status.PendingPlanRef != nil
}

// Whoami returns the caller's user name as the API server authenticates it.
func Whoami(ctx context.Context, cs kubernetes.Interface) (string, error) {
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("ask the API server who you are (SelfSubjectReview): %w", err)
	}
	if r.Status.UserInfo.Username == "" {
		return "", errors.New("the API server did not say who you are (SelfSubjectReview returned no user name)")
	}
	return r.Status.UserInfo.Username, nil
}

func run(ctx context.Context, opts *Options) error {
	c, ns, err := opts.Connect()
	if err != nil {
		return err
	}
	cs, err := opts.Kubernetes()
	if err != nil {
		return err
	}
	tp, _, err := objects.GetPlan(ctx, c, ns, opts.Arg)
	if err != nil {
		if errors.Is(err, objects.ErrNotFound) {
			return cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("%w; list plans with: %s plan list -n %s", err, opts.Name, ns))
		}
		return err
	}
	user, err := Whoami(ctx, cs)
	if err != nil {
		return err
	}
	res := Result{TypeMeta: cmdutil.Meta("Approval"), Plan: tp.Name, Namespace: tp.Namespace, Target: tp.Spec.TargetRef, PlanHash: tp.Spec.PlanHash}
	if err := Refusal(tp, opts.Hash, user, opts.Name); err != nil {
		// A script reading -o json gets the verdict as JSON too; the reason also goes to stderr.
		if opts.Output != cmdutil.Text {
			res.ApprovedBy, res.Phase, res.Refused = tp.Spec.ApprovedBy, objects.Phase(tp), err.Error()
			if perr := printResult(opts, res); perr != nil {
				return perr
			}
		}
		return cmdutil.WithCode(cmdutil.ExitFailure, err)
	}
	if tp.Spec.Approved {
		res.AlreadyApproved = true
		fmt.Fprintf(opts.IO.ErrOut, "TerraformPlan %s is already approved by %s.\n", tp.Name, tp.Spec.ApprovedBy)
	} else {
		p := show.Load(ctx, c, tp)
		show.Render(opts.IO.ErrOut, opts.Styles, opts.Name, p, false)
		fmt.Fprintln(opts.IO.ErrOut)
		question := fmt.Sprintf("Approve TerraformPlan %s (%s) as %s?", tp.Name, tp.Spec.PlanHash, user)
		if err := cmdutil.Confirm(opts.IO, opts.Yes || opts.Hash != "", question); err != nil {
			return err
		}
		if err := approve(ctx, c, tp, user); err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.ErrOut, "Approved TerraformPlan %s as %s.\n", tp.Name, user)
	}
	res.ApprovedBy = user
	res.Phase = objects.Phase(tp)
	pause, err := pauseOf(ctx, c, tp)
	if err != nil {
		return err
	}
	if pause != nil {
		res.Paused = pause.String()
		fmt.Fprintf(opts.IO.ErrOut, "%s\n", pause.Consequence(tp.Name))
		if opts.Wait {
			if perr := printResult(opts, res); perr != nil {
				return perr
			}
			return cmdutil.WithCode(cmdutil.ExitFound, fmt.Errorf("not waiting: %s", pause.Consequence(tp.Name)))
		}
	}
	if opts.Wait {
		phase, err := waitApplied(ctx, c, opts, tp)
		res.Phase = phase
		if perr := printResult(opts, res); perr != nil {
			return perr
		}
		return err
	}
	return printResult(opts, res)
}

func printResult(opts *Options, res Result) error {
	return cmdutil.Print(opts.IO.Out, opts.Output, res, func() error {
		state := string(res.Phase)
		if res.Paused != "" {
			state += "; paused: " + res.Paused
		}
		_, err := fmt.Fprintf(opts.IO.Out, "terraformplan/%s approved by %s (%s)\n", res.Plan, res.ApprovedBy, state)
		return err
	})
}

// Pause is what keeps a plan's target from applying: the cluster.x-k8s.io/paused annotation
// on the target itself, or spec.paused on its Cluster (as clusterctl move sets it). The
// manager reconciles neither while it lasts (CAPI's pause contract).
type Pause struct {
	// Kind and Name are the paused object (the target, or "Cluster"), in Namespace.
	Kind, Name, Namespace string
	// ClusterSpec is true for a Cluster's spec.paused, false for the annotation.
	ClusterSpec bool
}

// PauseOf returns the pause of target (a CAPTF object) or of its Cluster (nil when there is no
// Cluster), or nil when neither is paused. The Cluster's pause is reported first: unpausing the
// target alone would not apply anything.
func PauseOf(target *objects.Object, cluster *clusterv1.Cluster) *Pause {
	if cluster != nil && ptr.Deref(cluster.Spec.Paused, false) {
		return &Pause{Kind: "Cluster", Name: cluster.Name, Namespace: cluster.Namespace, ClusterSpec: true}
	}
	if _, ok := target.Obj.GetAnnotations()[clusterv1.PausedAnnotation]; ok {
		return &Pause{Kind: target.Kind, Name: target.Name(), Namespace: target.Namespace()}
	}
	return nil
}

// String names the pause: "Cluster team-a/web has spec.paused: true".
func (p *Pause) String() string {
	if p.ClusterSpec {
		return fmt.Sprintf("Cluster %s/%s has spec.paused: true", p.Namespace, p.Name)
	}
	return fmt.Sprintf("%s %s/%s has the %s annotation", p.Kind, p.Namespace, p.Name, clusterv1.PausedAnnotation)
}

// Unpause is the command that lifts the pause.
func (p *Pause) Unpause() string {
	if p.ClusterSpec {
		return fmt.Sprintf(`kubectl patch cluster %s -n %s --type merge -p '{"spec":{"paused":false}}'`, p.Name, p.Namespace)
	}
	return fmt.Sprintf("kubectl annotate %s %s -n %s %s-", strings.ToLower(p.Kind), p.Name, p.Namespace, clusterv1.PausedAnnotation)
}

// Consequence says what the pause means for the approved plan and how to lift it.
func (p *Pause) Consequence(plan string) string {
	return fmt.Sprintf("TerraformPlan %s will not apply while %s: the manager applies it once that is lifted "+
		"(a clusterctl move in progress lifts it itself; otherwise: %s)", plan, p, p.Unpause())
}

// pauseOf reads the plan's target and its Cluster and returns their pause. A target or
// Cluster that does not exist pauses nothing.
func pauseOf(ctx context.Context, c client.Reader, tp *captfv1.TerraformPlan) (*Pause, error) {
	o, err := objects.Get(ctx, c, tp.Namespace, tp.Spec.TargetRef.Kind+"/"+tp.Spec.TargetRef.Name)
	if errors.Is(err, objects.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return clusterPause(ctx, c, o)
}

func clusterPause(ctx context.Context, c client.Reader, o *objects.Object) (*Pause, error) {
	var cluster *clusterv1.Cluster
	if o.Cluster != "" {
		cl := &clusterv1.Cluster{}
		switch err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace(), Name: o.Cluster}, cl); {
		case err == nil:
			cluster = cl
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("read Cluster %s/%s: %w", o.Namespace(), o.Cluster, err)
		}
	}
	return PauseOf(o, cluster), nil
}

// Refusal says why tp cannot be approved by user (with hash, if given), or nil. name is the
// plugin as typed, for the commands the message suggests.
func Refusal(tp *captfv1.TerraformPlan, hash, user, name string) error {
	target := fmt.Sprintf("%s/%s", strings.ToLower(tp.Spec.TargetRef.Kind), tp.Spec.TargetRef.Name)
	if hash != "" && hash != tp.Spec.PlanHash {
		return fmt.Errorf("TerraformPlan %s has hash %s, not %s: the plan is not the one you reviewed; review it with: %s plan show %s -n %s",
			tp.Name, tp.Spec.PlanHash, hash, name, tp.Name, tp.Namespace)
	}
	switch objects.Phase(tp) {
	case captfv1.PlanSuperseded:
		return fmt.Errorf("TerraformPlan %s was superseded by a newer plan and can no longer be approved; review the newest with: %s plan show %s -n %s",
			tp.Name, name, target, tp.Namespace)
	case captfv1.PlanApplied:
		return fmt.Errorf("TerraformPlan %s was already applied; nothing to approve", tp.Name)
	case captfv1.PlanFailed:
		return fmt.Errorf("TerraformPlan %s failed (its apply planned something else) and can no longer be approved; the new plan waits: %s plan show %s -n %s",
			tp.Name, name, target, tp.Namespace)
	}
	if tp.Spec.Approved && tp.Spec.ApprovedBy != user {
		return fmt.Errorf("TerraformPlan %s is already approved by %s; an approval cannot be re-attributed", tp.Name, tp.Spec.ApprovedBy)
	}
	return nil
}

// approve patches the approval, guarded by the resourceVersion the summary was shown from, so
// a plan that changed meanwhile is never approved unseen.
func approve(ctx context.Context, c client.Client, tp *captfv1.TerraformPlan, user string) error {
	patch := client.MergeFromWithOptions(tp.DeepCopy(), client.MergeFromWithOptimisticLock{})
	tp.Spec.Approved = true
	tp.Spec.ApprovedBy = user
	if err := c.Patch(ctx, tp, patch); err != nil {
		switch {
		case apierrors.IsConflict(err):
			return fmt.Errorf("TerraformPlan %s changed while you reviewed it; run the command again to see it: %w", tp.Name, err)
		case apierrors.IsForbidden(err):
			return fmt.Errorf("approving TerraformPlan %s was refused (approving needs patch on terraformplans, ClusterRole capx-captf-plan-approver): %w", tp.Name, err)
		case apierrors.IsInvalid(err):
			return fmt.Errorf("the API server refused the approval of TerraformPlan %s: %w", tp.Name, err)
		}
		return fmt.Errorf("approve TerraformPlan %s: %w", tp.Name, err)
	}
	return nil
}

// waitApplied follows the plan and its target until the plan is Applied or can no longer be.
func waitApplied(ctx context.Context, c client.Reader, opts *Options, tp *captfv1.TerraformPlan) (captfv1.PlanPhase, error) {
	phase := objects.Phase(tp)
	f := cmdutil.Follower{ErrOut: opts.IO.ErrOut, Clock: opts.Clock, Interval: opts.Interval, Timeout: opts.Timeout}
	err := f.Follow(ctx, func(ctx context.Context) (string, bool, error) {
		cur := &captfv1.TerraformPlan{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(tp), cur); err != nil {
			if apierrors.IsNotFound(err) {
				return "", false, fmt.Errorf("TerraformPlan %s was deleted while waiting", tp.Name)
			}
			return "", false, nil
		}
		phase = objects.Phase(cur)
		progress := string(phase)
		if o, err := objects.Get(ctx, c, tp.Namespace, cur.Spec.TargetRef.Kind+"/"+cur.Spec.TargetRef.Name); err == nil {
			if p, err := clusterPause(ctx, c, o); err == nil && p != nil && phase != captfv1.PlanApplied {
				return progress, false, cmdutil.WithCode(cmdutil.ExitFound, fmt.Errorf("not waiting any longer: %s", p.Consequence(tp.Name)))
			}
			if j := o.Status.ActiveJob; j != nil {
				progress += fmt.Sprintf(", %s Job %s running", j.Operation, j.Name)
			}
			if cond := objects.Condition(o.Conditions, captfv1.ApplyJobSucceededCondition); cond != nil {
				progress += fmt.Sprintf(", %s=%s (%s)", cond.Type, cond.Status, cond.Reason)
			}
		}
		switch phase {
		case captfv1.PlanApplied:
			return progress, true, nil
		case captfv1.PlanFailed, captfv1.PlanSuperseded:
			return progress, false, fmt.Errorf("TerraformPlan %s is %s: %s", tp.Name, phase, planMessage(cur))
		}
		return progress, false, nil
	})
	var ended *cmdutil.WaitEnded
	if errors.As(err, &ended) {
		return phase, fmt.Errorf("TerraformPlan %s is still %s %s (the apply goes on); keep watching with: %s status -n %s", tp.Name, phase, ended.Waited, opts.Name, tp.Namespace)
	}
	return phase, err
}

func planMessage(tp *captfv1.TerraformPlan) string {
	if c := objects.Condition(tp.Status.Conditions, captfv1.ReadyCondition); c != nil && c.Message != "" {
		return c.Message
	}
	return "see " + tp.Name + "'s conditions"
}
