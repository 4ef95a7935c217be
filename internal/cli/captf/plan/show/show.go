// Package show is `kubectl captf plan show PLAN|OBJECT`: one plan's changes rendered for a
// human (deletes and replaces first, attribute-level changes, sensitive values masked) or as
// JSON/YAML, with kubectl diff's exit codes.
package show

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/planview"
	"github.com/capx-io/capx/internal/cli/captf/objects"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// Options are the command's inputs.
type Options struct {
	cmdutil.Deps
	Styles *cmdutil.Styles

	Arg    string
	Output cmdutil.Format
	// Summary hides attribute-level changes.
	Summary bool
}

// NewCmd returns the command; runF replaces run in tests.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Deps: f.Deps()}
	cmd := &cobra.Command{
		Use:   "show PLAN|OBJECT",
		Short: "Show one plan's changes: deletes and replaces first, attribute by attribute",
		Long: `Show the changes of a TerraformPlan, or of the pending plan of a TerraformCluster,
TerraformMachinePool or TerraformMachine (NAME or KIND/NAME). Resources are grouped by action,
deletes and replaces first; attribute-level before and after values are shown with sensitive
values masked and values known only after apply marked; moved, imported and forgotten
resources and output changes are listed. The changes are read from the Secret the plan's Job
stored, not from pod logs.

Exit codes, as kubectl diff: 0 the plan changes nothing, 1 it has changes, 2 an error, 3 bad
usage.`,
		Example: fmt.Sprintf(`  # the pending plan of a TerraformCluster
  %[1]s plan show my-cluster -n team-a

  # a plan by name, only the resource list
  %[1]s plan show my-cluster-4f2a9c01de --summary

  # for scripts: does the plan delete anything?
  %[1]s plan show tfc/my-cluster -o json | jq '[.changes[] | select(.action == "delete" or .action == "replace")] | length'`, f.Name),
		Args:              cmdutil.ExactArgs(1),
		ValidArgsFunction: cmdutil.CompleteNames(f, 1, append([]client.ObjectList{&captfv1.TerraformPlanList{}}, objects.Lists()...)...),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Arg = args[0]
			opts.Styles = f.Styles()
			if runF != nil {
				return runF(opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	cmdutil.AddOutputFlag(cmd, &opts.Output)
	cmd.Flags().BoolVar(&opts.Summary, "summary", false, "List resources only, without attribute changes.")
	return cmd
}

// Plan is the printed shape (kind PlanView).
type Plan struct {
	cmdutil.TypeMeta `json:",inline"`
	Name             string              `json:"name"`
	Namespace        string              `json:"namespace"`
	Target           captfv1.PlanTarget  `json:"target"`
	Phase            captfv1.PlanPhase   `json:"phase"`
	Reason           captfv1.PlanReason  `json:"reason"`
	PlanHash         string              `json:"planHash"`
	InputsHash       string              `json:"inputsHash"`
	Approved         bool                `json:"approved"`
	ApprovedBy       string              `json:"approvedBy,omitempty"`
	Summary          captfv1.PlanSummary `json:"summary"`
	Job              string              `json:"job,omitempty"`
	// ViewAvailable is false when the plan's readable changes were not stored (Changes and
	// Outputs are then empty; Summary still holds).
	ViewAvailable bool                      `json:"viewAvailable"`
	ViewProblem   string                    `json:"viewProblem,omitempty"`
	Changes       []planview.ResourceChange `json:"changes"`
	Outputs       []planview.OutputChange   `json:"outputs,omitempty"`
	TotalChanges  int                       `json:"totalChanges"`
	Truncated     bool                      `json:"truncated,omitempty"`
	// ValuesWithheld: the manager published the changes without values, because the plan's Job
	// stored readable changes that did not list its saved plan's changes (or none).
	ValuesWithheld bool `json:"valuesWithheld,omitempty"`
}

// HasChanges reports whether the plan changes anything.
func (p *Plan) HasChanges() bool {
	s := p.Summary
	return s.Create+s.Update+s.Replace+s.Delete+s.OutputChanges > 0 || len(p.Changes) > 0 || len(p.Outputs) > 0
}

func run(ctx context.Context, opts *Options) error {
	c, ns, err := opts.Connect()
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
	p := Load(ctx, c, tp)
	if err := cmdutil.Print(opts.IO.Out, opts.Output, p, func() error {
		w := bufio.NewWriterSize(opts.IO.Out, 64<<10)
		Render(w, opts.Styles, opts.Name, p, !opts.Summary)
		return w.Flush()
	}); err != nil {
		return err
	}
	if p.HasChanges() {
		return cmdutil.ErrFound
	}
	return nil
}

// Load reads the plan's published view (its TerraformPlanViews) and returns the printed shape.
// A missing, unreadable or unverifiable view is reported in ViewProblem, not as an error: the
// summary is still worth showing.
func Load(ctx context.Context, c client.Reader, tp *captfv1.TerraformPlan) *Plan {
	p := &Plan{
		TypeMeta: cmdutil.Meta("PlanView"), Name: tp.Name, Namespace: tp.Namespace, Target: tp.Spec.TargetRef,
		Phase: objects.Phase(tp), Reason: tp.Spec.Reason, PlanHash: tp.Spec.PlanHash, InputsHash: tp.Spec.InputsHash,
		Approved: tp.Spec.Approved, ApprovedBy: tp.Spec.ApprovedBy, Summary: tp.Spec.Summary, Job: tp.Status.Job,
		Changes: []planview.ResourceChange{},
	}
	v, err := ReadView(ctx, c, tp)
	if err != nil {
		p.ViewProblem = err.Error()
		return p
	}
	p.ViewAvailable = true
	p.Changes, p.Outputs, p.TotalChanges, p.Truncated, p.ValuesWithheld = v.Changes, v.Outputs, v.TotalChanges, v.Truncated, v.Withheld
	if p.Changes == nil {
		p.Changes = []planview.ResourceChange{}
	}
	return p
}

// ReadView reads and decodes the readable changes the manager published for the plan: its
// TerraformPlanViews, which must have the digest the plan records (spec.viewDigest, immutable,
// and bound into the plan hash the approval names). A plan that records no digest has no view
// that can be checked, and none is shown.
func ReadView(ctx context.Context, c client.Reader, tp *captfv1.TerraformPlan) (*planview.View, error) {
	if tp.Spec.ViewDigest == "" {
		return nil, fmt.Errorf("the plan records no view digest (a manager older than this plugin recorded it), so its readable changes cannot be checked and none are shown")
	}
	first := &captfv1.TerraformPlanView{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: tp.Namespace, Name: planview.SecretName(tp.Name)}, first); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("the manager published no readable changes for it (TerraformPlanView %s is missing)", planview.SecretName(tp.Name))
		}
		return nil, fmt.Errorf("read TerraformPlanView %s: %w", planview.SecretName(tp.Name), err)
	}
	parts := []captfv1.TerraformPlanView{*first}
	for i := 1; i < int(first.Parts) && i < planview.MaxChunks; i++ {
		part := &captfv1.TerraformPlanView{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: tp.Namespace, Name: planview.ChunkName(tp.Name, i)}, part); err != nil {
			return nil, fmt.Errorf("read TerraformPlanView %s: %w", planview.ChunkName(tp.Name, i), err)
		}
		parts = append(parts, *part)
	}
	v, err := planview.Read(tp.Name, tp.Spec.ViewDigest, parts)
	if err != nil {
		return nil, fmt.Errorf("%w; do not approve from these readable changes", err)
	}
	return v, nil
}

// Render writes the plan for a human. name is the plugin as typed ("kubectl captf").
func Render(w io.Writer, st *cmdutil.Styles, name string, p *Plan, attributes bool) {
	fmt.Fprintf(w, "%s %s  (%s/%s, namespace %s)\n", st.Bold("TerraformPlan"), st.Bold(p.Name), p.Target.Kind, p.Target.Name, p.Namespace)
	fmt.Fprintf(w, "Phase:   %s\n", phaseLine(st, p))
	fmt.Fprintf(w, "Hash:    %s\n", p.PlanHash)
	s := p.Summary
	fmt.Fprintf(w, "Plan:    %s to create, %s to update, %s to replace, %s to delete, %d output change(s)\n",
		st.OK(fmt.Sprint(s.Create)), st.Warn(fmt.Sprint(s.Update)), st.Bad(fmt.Sprint(s.Replace)), st.Bad(fmt.Sprint(s.Delete)), s.OutputChanges)
	if e := s.EndpointChange; e != nil {
		fmt.Fprintf(w, "%s the plan moves the control-plane endpoint from %s, which Cluster API keeps using, to %s\n",
			st.Bad("Endpoint:"), e.Latched, e.Planned)
	}
	if !p.ViewAvailable {
		fmt.Fprintf(w, "\n%s %s; the summary lists:\n", st.Warn("Readable changes unavailable:"), p.ViewProblem)
		for _, r := range s.Resources {
			fmt.Fprintf(w, "  %s\n", r)
		}
		if s.Truncated {
			fmt.Fprintln(w, "  ... (more changes than the summary keeps)")
		}
		if p.Job != "" {
			fmt.Fprintf(w, "The full plan is in the log of Job %s: %s logs %s/%s -n %s\n", p.Job, name, strings.ToLower(p.Target.Kind), p.Target.Name, p.Namespace)
		}
	} else {
		renderChanges(w, st, p, attributes)
	}
	if p.ValuesWithheld {
		fmt.Fprintf(w, "\n%s the plan's Job stored readable changes that did not list the changes of its saved plan (or none), so the manager "+
			"lists every change without values; the Job log has the plan: %s logs %s/%s -n %s\n",
			st.Warn("Values withheld:"), name, strings.ToLower(p.Target.Kind), p.Target.Name, p.Namespace)
	}
	if p.Truncated {
		fmt.Fprintf(w, "\n%s the stored view was cut to fit its Secrets (%d changes in the plan); the Job log has the rest: %s logs %s/%s -n %s\n",
			st.Warn("Truncated:"), p.TotalChanges, name, strings.ToLower(p.Target.Kind), p.Target.Name, p.Namespace)
	}
	if p.Phase == captfv1.PlanPending {
		fmt.Fprintf(w, "\nApprove exactly this plan with: %s approve %s -n %s --hash %s\n", name, p.Name, p.Namespace, p.PlanHash)
	}
}

func phaseLine(st *cmdutil.Styles, p *Plan) string {
	switch p.Phase {
	case captfv1.PlanPending:
		why := "applyPolicy is Manual"
		if p.Reason == captfv1.PlanReasonDestructive {
			why = "it deletes or replaces resources"
		}
		return st.Warn("Pending") + ", waiting for approval because " + why
	case captfv1.PlanApproved:
		return st.OK("Approved") + " by " + p.ApprovedBy + ", applying"
	case captfv1.PlanApplied:
		return st.OK("Applied") + approvedBy(p)
	case captfv1.PlanSuperseded:
		return st.Faint("Superseded") + ": a newer plan, or a restore of the state it was made against, replaced it"
	case captfv1.PlanFailed:
		return st.Bad("Failed") + ": the approved apply planned something else"
	}
	return string(p.Phase)
}

func approvedBy(p *Plan) string {
	if p.ApprovedBy == "" {
		return ""
	}
	return " (approved by " + p.ApprovedBy + ")"
}

var groups = []struct {
	action, title, mark string
}{
	{planview.ActionDelete, "Delete", "-"},
	{planview.ActionReplace, "Replace", "-/+"},
	{planview.ActionForget, "Forget (removed from state, left in place)", "."},
	{planview.ActionUpdate, "Update in place", "~"},
	{planview.ActionCreate, "Create", "+"},
	{planview.ActionRead, "Read", "<="},
	{planview.ActionNoop, "Moved or imported, no change", "="},
}

func markStyle(st *cmdutil.Styles, action string) func(string) string {
	switch action {
	case planview.ActionDelete, planview.ActionReplace:
		return st.Bad
	case planview.ActionUpdate, planview.ActionForget:
		return st.Warn
	case planview.ActionCreate:
		return st.OK
	}
	return st.Info
}

func renderChanges(w io.Writer, st *cmdutil.Styles, p *Plan, attributes bool) {
	for _, g := range groups {
		var in []planview.ResourceChange
		for _, c := range p.Changes {
			if c.Action == g.action {
				in = append(in, c)
			}
		}
		if len(in) == 0 {
			continue
		}
		// A view published before the manager sorted in index order still lists as tofu does.
		byAddress := func(a, b planview.ResourceChange) int { return planview.CompareAddresses(a.Address, b.Address) }
		if !slices.IsSortedFunc(in, byAddress) {
			slices.SortStableFunc(in, byAddress)
		}
		style := markStyle(st, g.action)
		fmt.Fprintf(w, "\n%s\n", st.Header(fmt.Sprintf("%s (%d)", g.title, len(in))))
		for _, c := range in {
			fmt.Fprintf(w, "  %s %s%s\n", style(g.mark), style(c.Address), notes(st, c))
			if !attributes {
				continue
			}
			if c.AttributesOmitted {
				fmt.Fprintf(w, "      %s\n", st.Faint("(attribute changes omitted)"))
			}
			for _, a := range c.Attributes {
				fmt.Fprintf(w, "      %s\n", attributeLine(st, a))
			}
		}
	}
	if len(p.Outputs) > 0 {
		fmt.Fprintf(w, "\n%s\n", st.Header(fmt.Sprintf("Outputs (%d)", len(p.Outputs))))
		for _, o := range p.Outputs {
			fmt.Fprintf(w, "  %s\n", valueLine(st, o.Name, o.Before, o.After, false))
		}
	}
	if len(p.Changes) == 0 && len(p.Outputs) == 0 {
		fmt.Fprintln(w, "\nNo changes.")
	}
}

func notes(st *cmdutil.Styles, c planview.ResourceChange) string {
	var n []string
	if c.MovedFrom != "" {
		n = append(n, "moved from "+c.MovedFrom)
	}
	if c.Imported {
		n = append(n, "imported, id "+c.ImportID)
	}
	if c.ReplaceOrder != "" {
		n = append(n, strings.ReplaceAll(c.ReplaceOrder, "-", " "))
	}
	if c.Reason != "" {
		n = append(n, strings.ReplaceAll(c.Reason, "_", " "))
	}
	if c.Deposed != "" {
		n = append(n, "deposed object "+c.Deposed)
	}
	if len(n) == 0 {
		return ""
	}
	return "  " + st.Faint("("+strings.Join(n, "; ")+")")
}

func attributeLine(st *cmdutil.Styles, a planview.AttributeChange) string {
	return valueLine(st, a.Path, a.Before, a.After, a.ForcesReplacement)
}

func valueLine(st *cmdutil.Styles, path string, before, after *string, forces bool) string {
	suffix := ""
	if forces {
		suffix = "  " + st.Bad("# forces replacement")
	}
	switch {
	case before == nil && after != nil:
		return st.OK("+") + " " + path + " = " + *after + suffix
	case before != nil && after == nil:
		return st.Bad("-") + " " + path + " = " + *before + suffix
	case before != nil && after != nil:
		return st.Warn("~") + " " + path + ": " + *before + " -> " + *after + suffix
	}
	return path + suffix
}
