package manager

import (
	"flag"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/version"
)

// NewCommand returns the `manager` command: it runs the controllers, and hosts the `version`
// subcommand and any extra subcommands (such as the CAPTF Job runner) the caller adds.
func NewCommand(extra ...*cobra.Command) *cobra.Command {
	v := viper.New()
	var configFile string
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Reconcile the CAPTF and CAPVCO Cluster API infrastructure providers",
		Long: `manager runs the controllers of both infrastructure providers: CAPTF (TerraformCluster,
TerraformMachine, TerraformMachinePool) and CAPVCO (VCOCluster, VCOMachine).

Every flag can also be set through the environment as CAPX_<FLAG> (dashes become underscores),
or in a YAML file given with --config.`,
		Example: `  # Run both providers against the current kubeconfig, watching every namespace
  manager --kubeconfig ~/.kube/config

  # Only CAPTF, only in namespace team-a, with leader election
  manager --providers=captf --namespace=team-a --leader-elect --leader-elect-namespace=capx-system`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if configFile != "" {
				v.SetConfigFile(configFile)
				if err := v.ReadInConfig(); err != nil {
					return fmt.Errorf("read --config %s: %w", configFile, err)
				}
			}
			o, err := Load(v)
			if err != nil {
				return err
			}
			ctrl.SetLogger(klog.NewKlogr())
			log := ctrl.Log.WithName("setup")
			log.Info("Starting the manager", "version", version.Get().Version, "providers", o.Providers,
				"namespace", o.Namespace, "watchFilter", o.WatchFilter, "leaderElectionID", o.LeaderElectionID)
			cfg, err := RESTConfig(o.Kubeconfig)
			if err != nil {
				return fmt.Errorf("load the management cluster's kubeconfig: %w", err)
			}
			ctx := ctrl.SetupSignalHandler()
			mgr, err := New(ctx, cfg, o)
			if err != nil {
				return err
			}
			return mgr.Start(ctx)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&configFile, "config", "", "YAML file with flag values (keys are flag names).")
	AddFlags(fs)
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlag(klogFlags.Lookup("v"))
	fs.AddGoFlag(klogFlags.Lookup("vmodule"))
	_ = v.BindPFlags(fs)
	v.SetEnvPrefix("CAPX")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()

	cmd.AddCommand(cmdutil.NewCmdVersion(nil, "manager", nil))
	cmd.AddCommand(extra...)
	return cmd
}
