package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/capx-io/capx/test/localcluster"
)

// Exit codes: 0 success (status: the cluster is up), 1 status found the cluster not up,
// 2 any error.
const (
	exitOK    = 0
	exitNotUp = 1
	exitError = 2
)

var errNotUp = errors.New("cluster is not up")

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCommand(stdout, stderr)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errNotUp):
		return exitNotUp
	default:
		fmt.Fprintln(stderr, "error:", err)
		return exitError
	}
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	var o localcluster.Options
	o.Progress = stderr
	root := &cobra.Command{
		Use:   "cluster",
		Short: "Run local single-node Kubernetes management clusters (root; see docs/local-cluster.md)",
		Long: `Run local single-node Kubernetes management clusters built from hack/toolchain.sh parts.

Every daemon runs inside the network namespace capx-<name>, which has no default route; the
API server is reached from the host on 127.0.0.1:<port> through a forwarder. Each cluster keeps
its config, PID files, logs and state in one folder (default _artifacts/clusters/<name>).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&o.Name, "name", "mgmt", "cluster name (folder, namespace capx-<name>, kubeconfig context)")
	pf.StringVar(&o.Dir, "dir", "", "cluster folder (default <repo>/_artifacts/clusters/<name>)")

	up := &cobra.Command{
		Use:   "up",
		Short: "Start the cluster (or reuse it if it is already up) and print its kubeconfig path",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := localcluster.Up(cmd.Context(), o)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "kubeconfig: %s\n", c.Kubeconfig())
			fmt.Fprintf(stderr, "use it with: export KUBECONFIG=%s   (stop with: hack/cluster down --name %s)\n", c.Kubeconfig(), c.Name())
			return nil
		},
	}
	up.Flags().IntVar(&o.APIServerPort, "port", 0, "host loopback port of the API server (default 16443 + slot)")
	up.Flags().StringVar(&o.PodCIDR, "pod-cidr", "", "pod range inside the namespace (default 10.<100+slot>.0.0/16)")
	up.Flags().StringVar(&o.ServiceCIDR, "service-cidr", "", "service range inside the namespace (default 10.<200+slot>.0.0/16)")
	up.Flags().StringVar(&o.BinDir, "bin-dir", "", "folder with etcd and the Kubernetes binaries (default <repo>/bin)")

	down := &cobra.Command{
		Use:   "down",
		Short: "Stop the cluster and remove everything it created except its logs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return localcluster.Down(cmd.Context(), o)
		},
	}

	// onCluster runs fn on the cluster the flags name, up or not.
	onCluster := func(fn func(cmd *cobra.Command, c *localcluster.Cluster, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			c, err := localcluster.Open(o)
			if err != nil {
				return err
			}
			return fn(cmd, c, args)
		}
	}

	var output string
	status := &cobra.Command{
		Use:   "status",
		Short: "Report each daemon, the namespace's isolation and node readiness (exit 1 when not up)",
		Args:  cobra.NoArgs,
		RunE: onCluster(func(cmd *cobra.Command, c *localcluster.Cluster, _ []string) error {
			s := c.Status(cmd.Context())
			if err := printStatus(stdout, s, output); err != nil {
				return err
			}
			if !s.Up() {
				return errNotUp
			}
			return nil
		}),
	}
	status.Flags().StringVarP(&output, "output", "o", "text", "text or json")

	var follow, pathOnly bool
	var lines int
	logs := &cobra.Command{
		Use:       "logs DAEMON",
		Short:     "Show (or follow with -f) a daemon's log",
		Long:      "Show a daemon's log. Daemons: " + fmt.Sprint(localcluster.DaemonNames()),
		Args:      cobra.ExactArgs(1),
		ValidArgs: localcluster.DaemonNames(),
		RunE: onCluster(func(cmd *cobra.Command, c *localcluster.Cluster, args []string) error {
			if pathOnly {
				fmt.Fprintln(stdout, c.LogPath(args[0]))
				return nil
			}
			return c.WriteLog(cmd.Context(), stdout, args[0], lines, follow)
		}),
	}
	logs.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing what is appended (Ctrl-C to stop)")
	logs.Flags().IntVar(&lines, "tail", 0, "only the last N lines (0: all)")
	logs.Flags().BoolVar(&pathOnly, "path", false, "print the log file's path only")

	kubeconfig := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print the path of the cluster's admin kubeconfig",
		Args:  cobra.NoArgs,
		RunE: onCluster(func(_ *cobra.Command, c *localcluster.Cluster, _ []string) error {
			fmt.Fprintln(stdout, c.Kubeconfig())
			return nil
		}),
	}

	root.AddCommand(up, down, status, logs, kubeconfig)
	return root
}

func printStatus(w io.Writer, s localcluster.Status, output string) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	case "text":
	default:
		return fmt.Errorf("unknown output %q: text or json", output)
	}
	if !s.Started {
		_, err := fmt.Fprintf(w, "cluster %s: DOWN (not started; hack/cluster up --name %s)\n", s.Name, s.Name)
		return err
	}
	state := "DOWN"
	if s.Up() {
		state = "UP"
	}
	fmt.Fprintf(w, "cluster %s: %s\n", s.Name, state)
	fmt.Fprintf(w, "  kubeconfig  %s\n  api server  %s\n  namespace   %s (pods %s, services %s)\n  isolation   %s\n  node        %s ready=%t %s\n",
		s.Kubeconfig, s.APIServer, s.NetNS, s.PodCIDR, s.Service, s.Isolation, s.Node.Name, s.Node.Ready, s.Node.Message)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  DAEMON\tPID\tSTATE\tLOG")
	for _, d := range s.Daemons {
		st, pid := "stopped", "-"
		if d.Running {
			st, pid = "running", fmt.Sprint(d.PID)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", d.Name, pid, st, d.Log)
	}
	return tw.Flush()
}
