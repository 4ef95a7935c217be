package owners

import (
	"github.com/spf13/cobra"

	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// NewCmd returns `owners` with the check and repair commands given.
func NewCmd(check, repair *cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "owners",
		Short: "Check and repair the owner references of state, backups, inputs and plans",
		Args:  cmdutil.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(check, repair)
	return cmd
}
