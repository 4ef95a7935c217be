// Package check is `kubectl captf owners check [CLUSTER]`: report state chunks, backups,
// inputs Secrets, plan keys, plans and plan views whose owner reference is missing or stale.
package check

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/cli/captf/owners"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// Options are the command's inputs.
type Options struct {
	IO        *cmdutil.IOStreams
	Styles    *cmdutil.Styles
	Name      string
	Client    func() (client.WithWatch, error)
	Namespace func() (string, error)

	Cluster string
	Output  cmdutil.Format
}

// NewCmd returns the command; runF replaces run in tests.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Name: f.Name, Client: f.Client, Namespace: f.Namespace}
	cmd := &cobra.Command{
		Use:   "check [CLUSTER]",
		Short: "Find Secrets and plans whose owner reference is missing or names a gone UID",
		Long: `Check the state chunks, state backups, inputs Secrets, plan keys, TerraformPlans and plan views
of every CAPTF object (of one Cluster, or the namespace): each must have an owner reference to
its object's current UID, or the garbage collector and clusterctl move treat it as unowned.
After a management cluster is restored from a backup, the references name UIDs that no longer
exist; "owners repair" fixes them before the garbage collector acts.

Exit codes: 0 nothing broken, 1 broken owner references found, 2 an error, 3 bad usage.`,
		Example: fmt.Sprintf(`  %[1]s owners check my-cluster -n team-a
  %[1]s owners check -n team-a -o json | jq '.findings[] | .name'`, f.Name),
		Args:              cmdutil.MaximumNArgs(1),
		ValidArgsFunction: cmdutil.CompleteNames(f, 1, &clusterv1.ClusterList{}),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Cluster = args[0]
			}
			opts.Styles = f.Styles()
			if runF != nil {
				return runF(opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	cmdutil.AddOutputFlag(cmd, &opts.Output)
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	ns, err := opts.Namespace()
	if err != nil {
		return err
	}
	objs, err := owners.Scope(ctx, c, ns, opts.Cluster)
	if err != nil {
		return err
	}
	findings, checked, err := owners.Find(ctx, c, objs)
	if err != nil {
		return err
	}
	r := owners.Report{TypeMeta: cmdutil.Meta("OwnerReferenceReport"), Namespace: ns, Cluster: opts.Cluster, Checked: checked, DryRun: true, Findings: findings}
	if r.Findings == nil {
		r.Findings = []owners.Finding{}
	}
	if err := cmdutil.Print(opts.IO.Out, opts.Output, r, func() error {
		owners.Render(r, opts.Styles, opts.IO.Out, opts.Name)
		return nil
	}); err != nil {
		return err
	}
	if len(findings) > 0 {
		return cmdutil.ErrFound
	}
	return nil
}
