package gpucheck

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// runCheck lists and classifies, prints, and turns the outcome into the exit code: 0 no
// orphans, 1 orphans found, 2 an error (an incomplete listing included, whatever it held).
func runCheck(ctx context.Context, o *Options) error {
	ctx, cancel := o.bound(ctx, time.Now(), 0)
	defer cancel()
	rep, _, err := o.scan(ctx)
	err = timedOut(ctx, err)
	if rep == nil {
		return err
	}
	if perr := cmdutil.Print(o.IO.Out, o.Output, o.check(rep), func() error { return o.writeCheck(rep) }); perr != nil {
		return perr
	}
	if err != nil {
		return cmdutil.WithCode(cmdutil.ExitFailure, err)
	}
	if rep.Summary.Orphans > 0 {
		return cmdutil.ErrFound
	}
	return nil
}

const exitCodes = `Exit codes: 0 no orphans; 1 orphans found; 2 error (credentials, API, --timeout, or a listing
that could not be read to the end: the tool never reports "no orphans" for a list it did not read
whole); 3 bad flags.

--timeout (default 1m) bounds the whole run, --cluster-timeout (15s) each call to the management
cluster, --api-timeout (20s) each attempt of a whitesky.cloud call: with the defaults, a run that
nothing answers ends within about a minute with exit 2.`

const classes = `Classes: owned (a live VCOMachine owns it), orphaned (its machine or cluster is gone),
renamed (starts with capvco but is not capvco_<ns>_<cluster>_<machine>_gpu_<n>), attached-foreign
(attached to a VM that is not its machine's), recycle-bin (deleted without permanently=true, still
billed), unverified (no management cluster was asked), foreign (not CAPVCO's). The orphans are every
unattached reservation that is neither owned nor foreign, and every attached-foreign one.`

// NewCmdOrphans is `kubectl capvco gpucheck orphans`.
func NewCmdOrphans(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	o := newOptions(f, "kubectl capvco gpucheck")
	cmd := &cobra.Command{
		Use:   "orphans",
		Short: "List vGPU reservations nobody owns (they are billed until released)",
		Long: `List every vGPU reservation of the clusters' whitesky.cloud accounts, classified against this
management cluster, and exit 1 if any is an orphan.

The credentials are those of every VCOCluster's Secret (one sweep per customer), or
--credentials-secret. Every location of the customer is read unless --location is given, page
by page to the end.

` + classes + `

` + exitCodes,
		Example: `  # every orphan of every account the clusters use
  kubectl capvco gpucheck orphans

  # one location, every reservation (foreign ones too), as JSON
  kubectl capvco gpucheck orphans --location nl-rmd-dc01-001 --all -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Styles = f.Styles()
			if runF != nil {
				return runF(o)
			}
			return runCheck(cmd.Context(), o)
		},
	}
	o.OnlyOrphans = true
	o.addFlags(cmd)
	o.addCredentialFlags(cmd)
	cmd.Flags().BoolVar(&o.All, "all", false, "List every reservation with its class, not only the orphans.")
	return cmd
}

func newOptions(f *cmdutil.Factory, name string) *Options {
	return &Options{IO: f.IO, Name: name, ReleaseCommand: name + " release", Client: f.Client, Namespace: f.Namespace}
}

// NewCmd is `kubectl capvco gpucheck`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gpucheck",
		Short: "Find and release orphaned vGPU reservations",
		Long: `A vGPU reservation is billed from the moment it exists until it is released permanently, and
the platform has no owner field: CAPVCO names reservations capvco_<ns>_<cluster>_<machine>_gpu_<n>.
"orphans" lists the ones nobody owns; "release" releases them permanently, after asking.`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(NewCmdOrphans(f, nil), NewCmdRelease(f, nil))
	return cmd
}

func fprintln(o *Options, format string, a ...any) { fmt.Fprintf(o.IO.Out, format+"\n", a...) }
