package gpucheck

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// StandaloneName is the standalone binary.
const StandaloneName = "capvco-gpucheck"

// NewStandalone is the capvco-gpucheck command: the check at the root (the seed's
// `capvco-gpucheck -location <location> -orphans`), release, version and completion.
func NewStandalone(f *cmdutil.Factory) *cobra.Command {
	o := newOptions(f, StandaloneName)
	o.Standalone = true
	root := &cobra.Command{
		Use:   StandaloneName,
		Short: "Find and release orphaned vGPU reservations on whitesky.cloud",
		Long: `capvco-gpucheck lists the vGPU reservations of a whitesky.cloud customer, tells which ones CAPVCO
owns, and exits 1 if any is an orphan. A reservation is billed from the moment it exists until it
is released permanently; CAPVCO names its reservations capvco_<ns>_<cluster>_<machine>_gpu_<n>, and
one that was renamed, or whose machine or cluster is gone, keeps billing.

Credentials come from --url/--customer/--jwt-file (or --client-id/--client-secret-file/--iam-url),
else from $VCO_URL, $VCO_CUSTOMER, $VCO_JWT ($VCO_CLIENT_ID, $VCO_CLIENT_SECRET, $VCO_IAM_URL), else
from --credentials-secret NAMESPACE/NAME, else from the Secret of every VCOCluster, both read
through the kubeconfig. When the kubeconfig reaches the management cluster, each reservation is
checked against its VCOMachines (--ownership).

Flags also work with a single dash (-location, -orphans), as in CAPVCO's documentation.

` + classes + `

` + exitCodes,
		Example: `  # the documented check: unattached capvco* reservations of one location, exit 1 if any
  capvco-gpucheck -location nl-rmd-dc01-001 -orphans

  # every location, credentials from the environment, JSON for a script
  VCO_URL=https://try.whitesky.cloud/api/1 VCO_CUSTOMER=acme VCO_JWT="$(cat jwt)" capvco-gpucheck -o json

  # release the orphans, after a question naming each
  capvco-gpucheck release --location nl-rmd-dc01-001`,
		Args:          cmdutil.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Styles = f.Styles()
			return runCheck(cmd.Context(), o)
		},
	}
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	if f.ConfigFlags != nil {
		f.ConfigFlags.AddFlags(root.PersistentFlags())
	}
	root.PersistentFlags().Var(&f.Color, "color", "Colour the output: auto (when stdout is a terminal and NO_COLOR is unset), always or never.")
	o.addFlags(root)
	o.addCredentialFlags(root)
	root.Flags().BoolVar(&o.OnlyOrphans, "orphans", false, "List only the orphans (default: every CAPVCO reservation with its class).")
	root.Flags().BoolVar(&o.All, "all", false, "Also list reservations that are not CAPVCO's.")
	root.AddCommand(newReleaseCmd(o, f, nil), cmdutil.NewCmdVersion(f, StandaloneName, nil))
	return root
}

// NormalizeArgs turns single-dash long flags (-location, -orphans=true) into double-dash ones
// for the flags cmd's tree knows, leaving shorthands (-o json, -y) and everything after "--"
// alone: CAPVCO documents `capvco-gpucheck -location <location> -orphans`.
func NormalizeArgs(cmd *cobra.Command, args []string) []string {
	long := map[string]bool{"help": true} // cobra adds --help only when it executes
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
			fs.VisitAll(func(fl *pflag.Flag) { long[fl.Name] = true })
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cmd)
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(name) > 1 && long[name] {
			a = "-" + a
		}
		out = append(out, a)
	}
	return out
}
