// Package check is `kubectl captf owners check [CLUSTER]`: report state chunks, backups,
// inputs Secrets, plan keys, plans and plan views whose owner reference is missing or stale.
package check

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
	Output cmdutil.Format
}

// NewCmd returns the command; runF replaces run in tests.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Deps: f.Deps()}
	cmd := &cobra.Command{
		Use:   "check [CLUSTER]",
		Short: "Find Secrets and plans whose owner reference is missing or names a gone UID",
		Long: `Check the state chunks, state backups, inputs Secrets, plan keys, TerraformPlans and plan views
of every CAPTF object (of one Cluster, of the namespace, or with -A of every namespace): each
must have an owner reference to its object's current UID, or the garbage collector and
clusterctl move treat it as unowned.
After a management cluster is restored from a backup, the references name UIDs that no longer
exist; "owners repair" fixes them before the garbage collector acts.

Exit codes: 0 nothing broken, 1 broken owner references found, 2 an error, 3 bad usage.`,
		Example: fmt.Sprintf(`  %[1]s owners check my-cluster -n team-a
  %[1]s owners check -A
  %[1]s owners check -n team-a -o json | jq '.findings[] | .name'`, f.Name),
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
	opts.AddFlags(cmd, "Check the objects of every namespace.")
	cmdutil.AddOutputFlag(cmd, &opts.Output)
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	return owners.Run(ctx, opts.Deps, opts.Styles, opts.ClusterScope, opts.Output, false)
}
