// Package backups is `kubectl captf backups`, the group of backups list and backups restore.
package backups

import (
	"github.com/spf13/cobra"

	"github.com/capx-io/capx/internal/cli/captf/backups/list"
	"github.com/capx-io/capx/internal/cli/captf/backups/restore"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// NewCmd returns `backups` with its subcommands.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backups",
		Short: "List an object's state backups and restore one",
		Args:  cmdutil.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(list.NewCmd(f, nil), restore.NewCmd(f, nil))
	return cmd
}
