// Package plan is `kubectl captf plan`, the group of plan list and plan show.
package plan

import (
	"github.com/spf13/cobra"

	"github.com/capx-io/capx/internal/cli/captf/plan/list"
	"github.com/capx-io/capx/internal/cli/captf/plan/show"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// NewCmd returns `plan` with its subcommands.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "List plans and show one plan's changes",
		Args:  cmdutil.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(list.NewCmd(f, nil), show.NewCmd(f, nil))
	return cmd
}
