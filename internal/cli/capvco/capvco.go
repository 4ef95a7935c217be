// Package capvco is the kubectl capvco plugin: its root command and the command packages
// beneath it (gpucheck, status, adoption, move), each in its own package.
package capvco

import (
	"github.com/spf13/cobra"

	"github.com/capx-io/capx/internal/cli/capvco/adoption"
	"github.com/capx-io/capx/internal/cli/capvco/gpucheck"
	"github.com/capx-io/capx/internal/cli/capvco/move"
	"github.com/capx-io/capx/internal/cli/capvco/status"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// Name is how users invoke the plugin.
const Name = "kubectl capvco"

// NewRoot is `kubectl capvco`.
func NewRoot(f *cmdutil.Factory) *cobra.Command {
	root := cmdutil.NewRoot(f, "Operate CAPVCO clusters: vGPU orphans, status, adoption, clusterctl move",
		`kubectl capvco operates the CAPVCO infrastructure provider (whitesky.cloud) from the management
cluster: find and release orphaned vGPU reservations, show a cluster's cloudspaces, load balancer,
DNS and machines, report adoption incidents, and prepare clusterctl move.

Exit codes are the same for every command: 0 success or nothing found, 1 something found (orphans,
an incident, a failed preflight check), 2 an error, 3 bad usage, 4 cancelled.`)
	root.AddGroup(&cobra.Group{ID: "ops", Title: "Operations:"}, &cobra.Group{ID: "inspect", Title: "Inspection:"})
	for _, c := range []*cobra.Command{gpucheck.NewCmd(f), move.NewCmd(f)} {
		c.GroupID = "ops"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{status.NewCmd(f, nil), adoption.NewCmd(f, nil)} {
		c.GroupID = "inspect"
		root.AddCommand(c)
	}
	root.AddCommand(cmdutil.NewCmdVersion(f, "kubectl-capvco", nil))
	return root
}
