// Package captf assembles `kubectl captf`, the operator's CLI for CAPTF: every command is its
// own package under internal/cli/captf/; this one only groups them.
package captf

import (
	"github.com/spf13/cobra"

	"github.com/capx-io/capx/internal/cli/captf/approve"
	"github.com/capx-io/capx/internal/cli/captf/backups"
	"github.com/capx-io/capx/internal/cli/captf/logs"
	"github.com/capx-io/capx/internal/cli/captf/move"
	"github.com/capx-io/capx/internal/cli/captf/owners"
	ownerscheck "github.com/capx-io/capx/internal/cli/captf/owners/check"
	ownersrepair "github.com/capx-io/capx/internal/cli/captf/owners/repair"
	"github.com/capx-io/capx/internal/cli/captf/plan"
	"github.com/capx-io/capx/internal/cli/captf/status"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// Name is how users type the plugin.
const Name = "kubectl captf"

// NewRoot returns `kubectl captf` with every command.
func NewRoot(f *cmdutil.Factory) *cobra.Command {
	root := cmdutil.NewRoot(f, "Operate CAPTF: status, plans and approvals, state backups, owner repair, clusterctl move",
		`kubectl captf operates the CAPTF Cluster API infrastructure provider (TerraformCluster,
TerraformMachinePool, TerraformMachine): see a cluster's objects as a tree, review and approve
plans, list and restore state backups, repair owner references after a restore, prepare a
clusterctl move, and read Job logs.

Every command takes kubectl's global flags (--kubeconfig, --context, -n, ...), prints -o json or
yaml for scripts (a versioned shape, apiVersion cli.capx.io/v1alpha1), never prompts without a
terminal (destructive commands then need --yes), and exits 0 on success, 1 when it found
something (changes, failed checks, broken references), 2 on errors, 3 on bad usage, 4 when a
confirmation was declined.`)
	groups := []*cobra.Group{
		{ID: "observe", Title: "Observe:"},
		{ID: "approve", Title: "Plans and approvals:"},
		{ID: "state", Title: "State and recovery:"},
		{ID: "move", Title: "clusterctl move:"},
	}
	root.AddGroup(groups...)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add("observe", status.NewCmd(f, nil), logs.NewCmd(f, nil))
	add("approve", plan.NewCmd(f), approve.NewCmd(f, nil))
	add("state", backups.NewCmd(f), owners.NewCmd(ownerscheck.NewCmd(f, nil), ownersrepair.NewCmd(f, nil)))
	add("move", move.NewCmd(f))
	root.AddCommand(cmdutil.NewCmdVersion(f, "kubectl-captf", nil))
	return root
}
