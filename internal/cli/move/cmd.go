package move

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/scheme"
)

// Extension is what a plugin adds to the shared move commands.
type Extension struct {
	// BlockMoveLists are the provider's list kinds whose objects (of the cluster, by the
	// cluster-name label) may carry clusterctl.cluster.x-k8s.io/block-move.
	BlockMoveLists []client.ObjectList
	// Preflight returns the provider's own checks (Jobs running, Secrets the target needs).
	Preflight func(ctx context.Context, src, dst client.Client, t Target) []Check
}

// PreflightOptions are `move preflight`'s inputs.
type PreflightOptions struct {
	cmdutil.Deps
	Styles *cmdutil.Styles
	// TargetClient builds the target cluster's client from --to-kubeconfig/--to-context.
	TargetClient func(path, context string) (client.Client, error)

	Provider                Provider
	Extension               Extension
	Cluster                 string
	ToKubeconfig, ToContext string
	Output                  cmdutil.Format
}

// Report is the printed shape of a preflight (kind MovePreflight).
type Report struct {
	cmdutil.TypeMeta `json:",inline"`
	Namespace        string  `json:"namespace"`
	Cluster          string  `json:"cluster"`
	Passed           bool    `json:"passed"`
	Checks           []Check `json:"checks"`
}

// NewCmd returns `move` with its preflight and register-inventory subcommands for provider p.
func NewCmd(f *cmdutil.Factory, p Provider, ext Extension) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "move",
		Short: "Prepare a clusterctl move: preflight checks and inventory registration",
		Long: `Everything clusterctl move needs before it can move a cluster's objects to another management
cluster. Run "preflight" first: it names every precondition move would fail on, and the fix.`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(NewCmdPreflight(f, p, ext, nil), NewCmdRegisterInventory(f, p, nil))
	return cmd
}

// NewCmdPreflight returns `move preflight CLUSTER --to-kubeconfig FILE`.
func NewCmdPreflight(f *cmdutil.Factory, p Provider, ext Extension, runF func(*PreflightOptions) error) *cobra.Command {
	opts := &PreflightOptions{Deps: f.Deps(), TargetClient: TargetClient, Provider: p, Extension: ext}
	cmd := &cobra.Command{
		Use:   "preflight CLUSTER --to-kubeconfig FILE",
		Short: "Check every precondition of clusterctl move, one pass/fail line each",
		Long: `Check, for one Cluster, every precondition clusterctl move needs, on the source (the current
context) and the target (--to-kubeconfig): the Cluster is ready and neither paused nor deleting,
no object blocks the move, the provider's CRDs are labelled for clusterctl on both sides, both
inventories list the providers, and the Secrets move does not carry are on the target.

Exit codes: 0 all checks pass, 1 a check failed, 2 the checks could not run, 3 bad usage.`,
		Example: fmt.Sprintf(`  %[1]s move preflight my-cluster -n team-a --to-kubeconfig target.kubeconfig
  %[1]s move preflight my-cluster -n team-a --to-kubeconfig target.kubeconfig -o json | jq '.checks[] | select(.passed | not)'`, f.Name),
		Args:              cmdutil.ExactArgs(1),
		ValidArgsFunction: cmdutil.CompleteNames(f, 1, &clusterv1.ClusterList{}),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Cluster = args[0]
			opts.Styles = f.Styles()
			if opts.ToKubeconfig == "" {
				return cmdutil.Usagef("--to-kubeconfig is required: the kubeconfig of the management cluster to move to")
			}
			if runF != nil {
				return runF(opts)
			}
			return RunPreflight(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.ToKubeconfig, "to-kubeconfig", "", "Kubeconfig of the target management cluster (required).")
	cmd.Flags().StringVar(&opts.ToContext, "to-context", "", "Context in --to-kubeconfig (default: its current context).")
	_ = cmd.MarkFlagFilename("to-kubeconfig")
	cmdutil.AddOutputFlag(cmd, &opts.Output)
	return cmd
}

// TargetClient builds a client for the target cluster.
func TargetClient(path, context string) (client.Client, error) {
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
		&clientcmd.ConfigOverrides{CurrentContext: context})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load --to-kubeconfig %s: %w", path, err)
	}
	return client.New(cfg, client.Options{Scheme: scheme.New()})
}

// RunPreflight runs the checks and prints them.
func RunPreflight(ctx context.Context, opts *PreflightOptions) error {
	src, ns, err := opts.Connect()
	if err != nil {
		return err
	}
	dst, err := opts.TargetClient(opts.ToKubeconfig, opts.ToContext)
	if err != nil {
		return cmdutil.WithCode(cmdutil.ExitFailure, err)
	}
	t := Target{Namespace: ns, Name: opts.Cluster}
	cl := &clusterv1.Cluster{}
	switch err := src.Get(ctx, client.ObjectKey{Namespace: ns, Name: opts.Cluster}, cl); {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("Cluster %s not found in namespace %s %s", opts.Cluster, ns,
			cmdutil.NamespaceHint(ns, cmdutil.Elsewhere(ctx, src, ns, opts.Cluster, &clusterv1.ClusterList{})))
	case err != nil:
		return fmt.Errorf("read Cluster %s/%s: %w", ns, opts.Cluster, err)
	}
	t.Cluster = cl
	fix := opts.Name + " move register-inventory"
	targetFix := fix + " --kubeconfig " + opts.ToKubeconfig
	if opts.ToContext != "" {
		targetFix += " --context " + opts.ToContext
	}
	var checks []Check
	checks = append(checks, CheckCluster(ctx, src, t)...)
	if len(opts.Extension.BlockMoveLists) > 0 {
		checks = append(checks, CheckBlockMove(ctx, src, t, opts.Extension.BlockMoveLists...))
	}
	if len(opts.Provider.CRDs) > 0 {
		checks = append(checks,
			CheckCRDs(ctx, src, "source", opts.Provider, fix),
			CheckCRDs(ctx, dst, "target", opts.Provider, targetFix))
	}
	checks = append(checks, CheckInventory(ctx, src, dst, opts.Provider, fix, targetFix)...)
	if opts.Extension.Preflight != nil {
		checks = append(checks, opts.Extension.Preflight(ctx, src, dst, t)...)
	}
	r := Report{TypeMeta: cmdutil.Meta("MovePreflight"), Namespace: ns, Cluster: opts.Cluster, Passed: true, Checks: checks}
	for _, c := range checks {
		r.Passed = r.Passed && c.Passed
	}
	if err := cmdutil.Print(opts.IO.Out, opts.Output, r, func() error { return printChecks(opts.IO.Out, opts.Styles, r) }); err != nil {
		return err
	}
	if !r.Passed {
		return cmdutil.ErrFound
	}
	return nil
}

func printChecks(w io.Writer, st *cmdutil.Styles, r Report) error {
	failed := 0
	for _, c := range r.Checks {
		mark := st.OK("PASS")
		if !c.Passed {
			mark = st.Bad("FAIL")
			failed++
		}
		fmt.Fprintf(w, "%s  %-28s %s\n", mark, c.Name, c.Message)
	}
	if failed > 0 {
		_, err := fmt.Fprintf(w, "\n%d of %d checks failed: clusterctl move would fail or leave objects behind.\n", failed, len(r.Checks))
		return err
	}
	_, err := fmt.Fprintf(w, "\nAll %d checks passed: clusterctl move --namespace %s --to-kubeconfig <target> can move Cluster %s.\n", len(r.Checks), r.Namespace, r.Cluster)
	return err
}

// RegisterOptions are `move register-inventory`'s inputs.
type RegisterOptions struct {
	cmdutil.Deps
	Provider Provider
	Version  string
	DryRun   bool
	Output   cmdutil.Format
}

// Registration is the printed shape of register-inventory (kind InventoryRegistration).
type Registration struct {
	cmdutil.TypeMeta `json:",inline"`
	Provider         string `json:"provider"`
	Namespace        string `json:"namespace"`
	Version          string `json:"version"`
	// VersionFrom says where the version came from (--version, the manager's Deployment, the
	// inventory's existing entry) and, when the manager's carried none, why not.
	VersionFrom string   `json:"versionFrom,omitempty"`
	DryRun      bool     `json:"dryRun"`
	Changes     []Change `json:"changes"`
}

// NewCmdRegisterInventory returns `move register-inventory`.
func NewCmdRegisterInventory(f *cmdutil.Factory, p Provider, runF func(*RegisterOptions) error) *cobra.Command {
	opts := &RegisterOptions{Deps: f.Deps(), Provider: p}
	cmd := &cobra.Command{
		Use:   "register-inventory",
		Short: "Write the clusterctl inventory entry for a provider installed without clusterctl",
		Long: fmt.Sprintf(`Write the clusterctl Provider inventory object (clusterctl.cluster.x-k8s.io/v1alpha3) for the
%[1]s provider exactly as clusterctl init writes it: %[2]s/%[3]s with providerName %[4]s,
type %[5]s, the version, and clusterctl's labels. clusterctl move and upgrade need it, and a
provider installed with Helm, Flux, Argo CD or plain manifests has none. It also installs the
inventory CRD from clusterctl's own manifest if it is missing, and adds clusterctl's labels to
the provider's CRDs where they lack them. Idempotent; --dry-run shows what it would change.

The version must be a semantic version, which clusterctl compares across clusters. Without
--version it is the running manager's (its Deployment's app.kubernetes.io/version label or
image tag, as a release sets them), else the version the inventory already records for the
provider (a source build tags its image with its content, which is no version; clusterctl init
or an earlier registration recorded the release the components came from). With neither, pass
--version.

Exit codes: 0 registered (or, with --dry-run, shown), 2 an error, 3 bad usage or no version to
record.`,
			p.Name, p.Namespace, p.ManifestLabel(), p.Name, p.Type),
		Example: fmt.Sprintf(`  %[1]s move register-inventory --dry-run
  %[1]s move register-inventory --version v0.1.0
  %[1]s move register-inventory --kubeconfig target.kubeconfig`, f.Name),
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Version != "" {
				if err := ValidateVersion(opts.Version); err != nil {
					return cmdutil.WithCode(cmdutil.ExitUsage, err)
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return RunRegisterInventory(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Version, "version", "", "Provider version to record (default: the running manager's).")
	cmd.Flags().StringVar(&opts.Provider.Namespace, "provider-namespace", p.Namespace, "Namespace the provider is installed in.")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "Print what would change; change nothing.")
	cmdutil.AddOutputFlag(cmd, &opts.Output)
	return cmd
}

// RunRegisterInventory registers the inventory entry and prints what changed.
func RunRegisterInventory(ctx context.Context, opts *RegisterOptions) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	v, from := opts.Version, "--version"
	if v == "" {
		m, merr := cmdutil.FindManager(ctx, c, opts.Provider.Namespace)
		existing, err := InventoryVersion(ctx, c, opts.Provider)
		if err != nil {
			return err
		}
		if v, from, err = ChooseVersion(m, merr, existing); err != nil {
			return cmdutil.WithCode(cmdutil.ExitUsage, err)
		}
	}
	changes, err := RegisterInventory(ctx, c, opts.Provider, v, opts.DryRun)
	r := Registration{TypeMeta: cmdutil.Meta("InventoryRegistration"), Provider: opts.Provider.ManifestLabel(),
		Namespace: opts.Provider.Namespace, Version: v, VersionFrom: from, DryRun: opts.DryRun, Changes: changes}
	if perr := cmdutil.Print(opts.IO.Out, opts.Output, r, func() error {
		prefix := ""
		if opts.DryRun {
			prefix = "(dry run) "
		}
		fmt.Fprintf(opts.IO.Out, "%sversion %s (%s)\n", prefix, v, from)
		for _, ch := range changes {
			fmt.Fprintf(opts.IO.Out, "%s%-9s %s  %s\n", prefix, ch.Action, ch.Object, ch.Detail)
		}
		return nil
	}); perr != nil {
		return errors.Join(err, perr)
	}
	return err
}
