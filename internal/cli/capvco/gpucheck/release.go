package gpucheck

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/gpucheck"
)

// runRelease lists, selects the releasable orphans, asks (or takes --yes), and releases each
// after re-checking it, printing one line per reservation. Exit codes: 0 every orphan is gone,
// 1 orphans remain (attached, skipped, or unverified), 2 an error or a failed release.
func runRelease(ctx context.Context, o *Options) error {
	start := time.Now()
	listCtx, cancel := o.bound(ctx, start, 0)
	defer cancel()
	rep, mc, err := o.scan(listCtx)
	if err = timedOut(listCtx, err); err != nil {
		if rep != nil && o.Output == cmdutil.Text {
			_ = o.writeCheck(rep)
		}
		return cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("%w\nnothing was released; narrow the sweep with --location to release what can be read", err))
	}
	selected, err := o.selectOrphans(rep)
	if err != nil {
		return err
	}
	text := o.Output == cmdutil.Text
	if text && !rep.OwnershipChecked && rep.OwnershipNote != "" {
		fmt.Fprintln(o.IO.ErrOut, "Warning: ownership "+rep.OwnershipNote+".")
	}
	if o.DryRun {
		return o.dryRun(rep, selected)
	}
	if len(selected) == 0 {
		if err := cmdutil.Print(o.IO.Out, o.Output, o.release(rep, nil), func() error {
			fprintln(o, "Nothing to release. %s", o.summaryLine(rep))
			o.explainLeftovers(rep, nil)
			return nil
		}); err != nil {
			return err
		}
		return o.exitAfterRelease(rep, nil, nil)
	}
	if !o.Yes {
		fmt.Fprintf(o.IO.ErrOut, "These %s will be released permanently (this cannot be undone):\n", plural(len(selected), "reservation"))
		writeFindings(o.IO.ErrOut, o.Styles, selected, selected[0].Account != "")
	}
	asked := time.Now()
	if err := cmdutil.Confirm(o.IO, o.Yes, fmt.Sprintf("Release %s permanently?", plural(len(selected), "reservation"))); err != nil {
		return err
	}
	ctx, cancel = o.bound(ctx, start, time.Since(asked))
	defer cancel()
	r := &gpucheck.Releaser{Platform: nil, Cluster: mc, PageSize: o.PageSize}
	var results []gpucheck.ReleaseResult
	for _, group := range byAccount(selected) {
		r.Platform = o.platforms[group[0].Account]
		if text {
			r.Progress = func(res gpucheck.ReleaseResult) { o.writeResult(res) }
		}
		results = append(results, r.Release(ctx, group)...)
	}
	if err := cmdutil.Print(o.IO.Out, o.Output, o.release(rep, results), func() error {
		counts := map[gpucheck.Outcome]int{}
		for _, res := range results {
			counts[res.Outcome]++
		}
		fprintln(o, "\nReleased %d, skipped %d, failed %d.", counts[gpucheck.Released], counts[gpucheck.Skipped], counts[gpucheck.Failed])
		o.explainLeftovers(rep, selected)
		return nil
	}); err != nil {
		return err
	}
	if ctx.Err() != nil {
		n := 0
		for _, res := range results {
			if res.Outcome == gpucheck.Released {
				n++
			}
		}
		return cmdutil.WithCode(cmdutil.ExitFailure, timedOut(ctx, fmt.Errorf("released %d of %d; run the release again for the rest", n, len(results))))
	}
	return o.exitAfterRelease(rep, selected, results)
}

// optIns are the release's opt-ins; an --id is the opt-in for the renamed reservation it
// names.
func (o *Options) optIns() gpucheck.OptIns {
	return gpucheck.OptIns{Renamed: o.IncludeRenamed || len(o.IDs) > 0, Unverified: o.AllowUnverified}
}

// dryRun prints what a release would select, and why the other orphans would stay, and
// exits as the check does: 0 no orphans, 1 orphans. It never asks and releases nothing.
func (o *Options) dryRun(rep *gpucheck.Report, selected []gpucheck.Finding) error {
	results := make([]gpucheck.ReleaseResult, 0, len(selected))
	for _, f := range selected {
		results = append(results, gpucheck.ReleaseResult{Finding: f, Outcome: gpucheck.WouldRelease})
	}
	if err := cmdutil.Print(o.IO.Out, o.Output, o.release(rep, results), func() error {
		if len(selected) > 0 {
			writeFindings(o.IO.Out, o.Styles, selected, selected[0].Account != "")
			fmt.Fprintln(o.IO.Out)
		}
		fprintln(o, "Dry run: %s would be released; nothing was released. %s", plural(len(selected), "reservation"), o.summaryLine(rep))
		o.explainLeftovers(rep, selected)
		return nil
	}); err != nil {
		return err
	}
	if rep.Summary.Orphans > 0 {
		return cmdutil.ErrFound
	}
	return nil
}

// selectOrphans picks what may be released: the Releasable orphans, the others only with the
// opt-in each needs, and only the --id ones when given.
func (o *Options) selectOrphans(rep *gpucheck.Report) ([]gpucheck.Finding, error) {
	var out []gpucheck.Finding
	byID := map[string]gpucheck.Finding{}
	for _, f := range rep.Findings {
		byID[f.ID] = f
	}
	if len(o.IDs) > 0 {
		var errs []error
		for _, id := range o.IDs {
			f, ok := byID[id]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("--id %s: no such reservation in the locations read", id))
			case !gpucheck.Selectable(f, o.optIns()):
				errs = append(errs, fmt.Errorf("--id %s (%s): not releasable: %s, %s", id, quote(f.Name), f.Class, notReleasableWhy(f)))
			default:
				out = append(out, f)
			}
		}
		if len(errs) > 0 {
			return nil, cmdutil.WithCode(cmdutil.ExitUsage, errors.Join(errs...))
		}
		return out, nil
	}
	for _, f := range rep.Findings {
		if gpucheck.Selectable(f, o.optIns()) {
			out = append(out, f)
		}
	}
	return out, nil
}

func notReleasableWhy(f gpucheck.Finding) string {
	switch {
	case !f.Orphan:
		return "it is not an orphan"
	case f.Attached():
		return "it is attached to VM " + attachedTo(f) + ": detach it or delete the VM first"
	case f.ReleaseNeeds == gpucheck.OptInRenamed:
		return "its name is not exactly capvco_<ns>_<cluster>_<machine>_gpu_<n>, so it may be kept on purpose or be another team's: " +
			"once you know nobody keeps it, release it by --id (or all such with --include-renamed)"
	case f.ReleaseNeeds == gpucheck.OptInUnverified:
		return "its owner was not checked against the management cluster (pass --allow-unverified if no management cluster owns it)"
	}
	return "it cannot be released"
}

// explainLeftovers says which orphans were not selected and why.
func (o *Options) explainLeftovers(rep *gpucheck.Report, selected []gpucheck.Finding) {
	chosen := map[string]bool{}
	for _, s := range selected {
		chosen[s.ID] = true
	}
	if len(o.IDs) > 0 {
		return
	}
	const most = 20
	var lines []string
	n := 0
	for _, f := range rep.Findings {
		if f.Orphan && !chosen[f.ID] {
			if n++; n <= most {
				lines = append(lines, fmt.Sprintf("  %s %s: %s", f.ID, quote(f.Name), notReleasableWhy(f)))
			}
		}
	}
	if n > most {
		lines = append(lines, fmt.Sprintf("  ... and %d more (-o json lists them all)", n-most))
	}
	if n > 0 {
		fmt.Fprintf(o.IO.ErrOut, "Not released (%d):\n%s\n", n, strings.Join(lines, "\n"))
	}
}

func (o *Options) writeResult(res gpucheck.ReleaseResult) {
	st := o.Styles
	word := string(res.Outcome)
	pad := strings.Repeat(" ", len("released")-len(word)+1)
	switch res.Outcome {
	case gpucheck.Released:
		word = st.OK(word)
	case gpucheck.Skipped:
		word = st.Warn(word)
	default:
		word = st.Bad(word)
	}
	line := fmt.Sprintf("%s%s%s  %s  %s", word, pad, res.Location, res.ID, quote(res.Name))
	if res.Detail != "" {
		line += ": " + res.Detail
	}
	fprintln(o, "%s", line)
}

// exitAfterRelease: 2 if a release failed; else 1 if an orphan is left (of those asked for
// with --id, or of all); else 0.
func (o *Options) exitAfterRelease(rep *gpucheck.Report, selected []gpucheck.Finding, results []gpucheck.ReleaseResult) error {
	released := map[string]bool{}
	var failed []string
	for _, r := range results {
		switch r.Outcome {
		case gpucheck.Released:
			released[r.ID] = true
		case gpucheck.Failed:
			failed = append(failed, fmt.Sprintf("%s (%s): %s", r.ID, quote(r.Name), r.Detail))
		}
	}
	if len(failed) > 0 {
		return cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("%s failed:\n  %s", plural(len(failed), "release"), strings.Join(failed, "\n  ")))
	}
	considered := rep.Findings
	if len(o.IDs) > 0 {
		considered = selected
	}
	for _, f := range considered {
		if f.Orphan && !released[f.ID] {
			return cmdutil.ErrFound
		}
	}
	return nil
}

// byAccount groups findings by account, keeping their order.
func byAccount(fs []gpucheck.Finding) [][]gpucheck.Finding {
	var keys []string
	groups := map[string][]gpucheck.Finding{}
	for _, f := range fs {
		if _, ok := groups[f.Account]; !ok {
			keys = append(keys, f.Account)
		}
		groups[f.Account] = append(groups[f.Account], f)
	}
	out := make([][]gpucheck.Finding, 0, len(keys))
	for _, k := range keys {
		out = append(out, groups[k])
	}
	return out
}

// NewCmdRelease is `kubectl capvco gpucheck release`.
func NewCmdRelease(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	o := newOptions(f, "kubectl capvco gpucheck")
	cmd := newReleaseCmd(o, f, runF)
	o.addCredentialFlags(cmd)
	return cmd
}

func newReleaseCmd(o *Options, f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "release",
		Short: "Release orphaned vGPU reservations permanently",
		Long: `Release the orphans the check lists, permanently (permanently=true: a plain delete would leave them
in the recycle bin, still billed). It asks first, naming each one, unless --yes; without a terminal
it needs --yes.

Only unattached orphans are released. Just before each release the owner is read again from the
management cluster (a machine that came back keeps its reservation) and the reservation is read
again from the platform (renamed, attached, restored or gone since the listing: skipped). The
release itself says detach=false, so a reservation attached in the last instant is refused by the
platform rather than detached. One result line per reservation.

By default only orphans named exactly capvco_<ns>_<cluster>_<machine>_gpu_<n> whose machine or
cluster the management cluster confirmed gone are selected. A name that only starts with
"capvco" (renamed, kept on purpose such as capvco_..._gpu_0-keep, or another team's) is released
only by --id or with --include-renamed; without a management cluster, a parsed name only with
--allow-unverified.

Exit codes: 0 no orphan is left (of those --id names, when given); 1 orphans remain (attached,
skipped, or not selected); 2 an error, a failed release, or --timeout ran out (a listing that could
not be read to the end releases nothing; releases not tried before the deadline are skipped and
named); 3 bad flags, or no terminal to confirm on without --yes; 4 the question was answered no.

--dry-run lists what would be released, and why the other orphans would not be, without asking
(no terminal or --yes needed); it releases nothing and exits as the check does.

--timeout (default 1m) bounds the whole run except the time the question waits for its answer.`,
		Example: "  # see what would be released, without a question\n  " + o.ReleaseCommand + " --location nl-rmd-dc01-001 --dry-run\n\n" +
			"  # release after a question naming each reservation\n  " + o.ReleaseCommand + " --location nl-rmd-dc01-001\n\n" +
			"  # in a script: no question, one reservation, JSON results\n  " + o.ReleaseCommand + " --id vgpu-000042 --yes -o json",
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Styles == nil {
				o.Styles = f.Styles()
			}
			if runF != nil {
				return runF(o)
			}
			return runRelease(cmd.Context(), o)
		},
	}
	o.addFlags(cmd)
	cmd.Flags().BoolVarP(&o.Yes, "yes", "y", false, "Release without asking.")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "Only list what would be released (and why the other orphans would not be), without asking; exit 0 no orphans, 1 orphans.")
	cmd.Flags().BoolVar(&o.AllowUnverified, "allow-unverified", false, "Also release unattached reservations whose owner no management cluster confirmed gone.")
	cmd.Flags().BoolVar(&o.IncludeRenamed, "include-renamed", false, "Also release unattached orphans whose names only start with capvco (renamed, kept on purpose, or another team's): check each first.")
	cmd.Flags().StringSliceVar(&o.IDs, "id", nil, "Release only these reservation ids (repeatable); each must be an unattached orphan (a renamed one too; an unverified one with --allow-unverified).")
	return cmd
}
