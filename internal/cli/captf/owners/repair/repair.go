// Package repair is `kubectl captf owners repair [CLUSTER] --yes`: set the owner references
// owners check reports as missing or stale. Without --yes it only shows what it would change.
package repair

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capx-io/capx/internal/cli/captf/owners"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// Options are the command's inputs.
type Options struct {
	cmdutil.Deps
	Styles *cmdutil.Styles

	cmdutil.ClusterScope
	Yes    bool
	Output cmdutil.Format
}

// NewCmd returns the command; runF replaces run in tests.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Deps: f.Deps()}
	cmd := &cobra.Command{
		Use:   "repair [CLUSTER] --yes",
		Short: "Repair missing or stale owner references (a dry run without --yes)",
		Long: `Give every Secret and TerraformPlan that "owners check" reports an owner reference to its CAPTF
object's current UID (a plan view: to its TerraformPlan), dropping the stale one. Each patch is
guarded by the object's resourceVersion. Without --yes nothing is changed: the command lists
what it would repair. Its scope is that of "owners check": one Cluster, the namespace, or with -A
every namespace.

Exit codes: 0 nothing to repair or all repaired, 1 repairs needed (dry run), 2 an error.`,
		Example: fmt.Sprintf(`  %[1]s owners repair my-cluster -n team-a          # dry run
  %[1]s owners repair my-cluster -n team-a --yes
  %[1]s owners repair -A --yes`, f.Name),
		Args:              cmdutil.MaximumNArgs(1),
		ValidArgsFunction: cmdutil.CompleteNames(f, 1, &clusterv1.ClusterList{}),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.Parse(args); err != nil {
				return err
			}
			opts.Styles = f.Styles()
			if runF != nil {
				return runF(opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "Repair; without it, only show what would be repaired.")
	opts.AddFlags(cmd, "Repair the objects of every namespace.")
	cmdutil.AddOutputFlag(cmd, &opts.Output)
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	return owners.Run(ctx, opts.Deps, opts.Styles, opts.ClusterScope, opts.Output, opts.Yes)
}
