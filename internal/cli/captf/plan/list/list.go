// Package list is `kubectl captf plan list`: pending (and, with --all, recent) TerraformPlans.
package list

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/cli/captf/objects"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// Options are the command's inputs.
type Options struct {
	cmdutil.Deps
	Styles *cmdutil.Styles
	Now    func() time.Time

	AllNamespaces bool
	All           bool
	Destructive   bool
	Output        cmdutil.Format

	// namespace is the one listed ("" with -A).
	namespace string
}

// NewCmd returns the command; runF replaces run in tests.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Deps: f.Deps(), Now: time.Now}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the plans waiting for approval (and, with --all, the recent ones)",
		Long: `List TerraformPlans: by default those waiting for approval or being applied (Pending,
Approved), newest first; --all adds Applied, Superseded and Failed ones.`,
		Example: fmt.Sprintf(`  %[1]s plan list -A
  %[1]s plan list -n team-a --destructive
  %[1]s plan list --all -o json | jq -r '.items[] | select(.phase == "Pending") | .name'`, f.Name),
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Styles = f.Styles()
			if runF != nil {
				return runF(opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.AllNamespaces, "all-namespaces", "A", false, "List plans in every namespace.")
	cmd.Flags().BoolVar(&opts.All, "all", false, "Include Applied, Superseded and Failed plans.")
	cmd.Flags().BoolVar(&opts.Destructive, "destructive", false, "Only plans that delete or replace resources.")
	cmdutil.AddOutputFlag(cmd, &opts.Output)
	return cmd
}

// List is the printed shape (kind PlanList).
type List struct {
	cmdutil.TypeMeta `json:",inline"`
	Items            []Item `json:"items"`
}

// Item is one plan.
type Item struct {
	Name        string              `json:"name"`
	Namespace   string              `json:"namespace"`
	Target      captfv1.PlanTarget  `json:"target"`
	Phase       captfv1.PlanPhase   `json:"phase"`
	Reason      captfv1.PlanReason  `json:"reason"`
	Destructive bool                `json:"destructive"`
	PlanHash    string              `json:"planHash"`
	Summary     captfv1.PlanSummary `json:"summary"`
	ApprovedBy  string              `json:"approvedBy,omitempty"`
	Created     time.Time           `json:"created"`
}

func run(ctx context.Context, opts *Options) error {
	c, ns, err := opts.ConnectScope(opts.AllNamespaces)
	if err != nil {
		return err
	}
	opts.namespace = ns
	var lo []client.ListOption
	if opts.Destructive {
		lo = append(lo, client.MatchingLabels{captfv1.DestructiveLabel: "true"})
	}
	plans, err := objects.Plans(ctx, c, ns, lo...)
	if err != nil {
		return err
	}
	l := List{TypeMeta: cmdutil.Meta("PlanList"), Items: []Item{}}
	for i := range plans {
		tp := &plans[i]
		phase := objects.Phase(tp)
		if !opts.All && phase != captfv1.PlanPending && phase != captfv1.PlanApproved {
			continue
		}
		l.Items = append(l.Items, Item{
			Name: tp.Name, Namespace: tp.Namespace, Target: tp.Spec.TargetRef, Phase: phase, Reason: tp.Spec.Reason,
			Destructive: tp.Labels[captfv1.DestructiveLabel] == "true", PlanHash: tp.Spec.PlanHash, Summary: tp.Spec.Summary,
			ApprovedBy: tp.Spec.ApprovedBy, Created: tp.CreationTimestamp.Time,
		})
	}
	return cmdutil.Print(opts.IO.Out, opts.Output, l, func() error { return render(opts, l) })
}

func render(opts *Options, l List) error {
	w := opts.IO.Out
	if len(l.Items) == 0 {
		where := fmt.Sprintf("in namespace %s (-n NAMESPACE for another, -A for every namespace)", opts.namespace)
		if opts.AllNamespaces {
			where = "in any namespace"
		}
		what := "No plans wait for approval"
		if opts.All {
			what = "No plans"
		}
		_, err := fmt.Fprintf(w, "%s %s.\n", what, where)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	st := opts.Styles
	if opts.AllNamespaces {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprintln(tw, "NAME\tTARGET\tPHASE\tREASON\tCHANGES\tAPPROVED BY\tAGE")
	for _, it := range l.Items {
		if opts.AllNamespaces {
			fmt.Fprintf(tw, "%s\t", it.Namespace)
		}
		s := it.Summary
		changes := fmt.Sprintf("+%d ~%d -/+%d -%d", s.Create, s.Update, s.Replace, s.Delete)
		if it.Destructive {
			changes = st.Bad(changes)
		}
		phase := string(it.Phase)
		if it.Phase == captfv1.PlanPending {
			phase = st.Warn(phase)
		}
		approvedBy := it.ApprovedBy
		if approvedBy == "" {
			approvedBy = "-"
		}
		fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\t%s\t%s\n", it.Name, it.Target.Kind, it.Target.Name, phase, it.Reason, changes, approvedBy,
			duration.HumanDuration(opts.Now().Sub(it.Created)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ns := "NAMESPACE"
	if !opts.AllNamespaces {
		ns = opts.namespace
	}
	_, err := fmt.Fprintf(w, "\nReview one with: %s plan show NAME -n %s\n", opts.Name, ns)
	return err
}
