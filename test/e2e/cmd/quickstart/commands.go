package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/capx-io/capx/test/e2e/artifacts"
	"github.com/capx-io/capx/test/e2e/install"
	"github.com/capx-io/capx/test/e2e/quickstart"
	"github.com/capx-io/capx/test/images"
	"github.com/capx-io/capx/test/localcluster"
)

// options are the flags every command shares.
type options struct {
	name      string
	namespace string
	flow      string
	purge     bool
	root      string
}

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCommand(stdout, stderr)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &options{}
	root := &cobra.Command{
		Use:           "quickstart",
		Short:         "A local management cluster with Cluster API, the capx providers, the simulator and samples (root)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&o.name, "name", "quickstart", "local cluster name (hack/cluster --name)")
	pf.StringVar(&o.namespace, "namespace", "quickstart", "namespace of the sample clusters")

	up := &cobra.Command{
		Use:   "up",
		Short: "Build what is missing, start the cluster, install everything, create the samples and wait for them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := resolveRoot(o); err != nil {
				return err
			}
			return runUp(cmd.Context(), o, stdout, stderr)
		},
	}
	up.Flags().StringVar(&o.flow, "flow", string(install.FlowClusterctl), "how to install the providers: clusterctl (clusterctl init) or manifests (kubectl apply)")

	down := &cobra.Command{
		Use:   "down",
		Short: "Stop the cluster and remove everything it created (its logs stay; --purge removes the image and install caches too)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := resolveRoot(o); err != nil {
				return err
			}
			return runDown(cmd.Context(), o, stderr)
		},
	}
	down.Flags().BoolVar(&o.purge, "purge", false, "also remove _artifacts/images and _artifacts/install (rebuilt by the next up)")

	imgs := &cobra.Command{
		Use:   "images",
		Short: "Build the images (manager, CAPI manager, vcosim, httpget, test modules) as tarballs under _artifacts/images",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := resolveRoot(o); err != nil {
				return err
			}
			set, err := images.BuildLocal(cmd.Context(), images.LocalOptions{Root: o.root, Progress: stderr})
			if err != nil {
				return err
			}
			for _, b := range set.All() {
				fmt.Fprintf(stdout, "%s\t%s\n", b.Ref, b.Tarball)
			}
			return nil
		},
	}

	status := &cobra.Command{
		Use:   "status",
		Short: "Show the cluster's daemons and the samples (clusterctl describe)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := resolveRoot(o); err != nil {
				return err
			}
			return runStatus(cmd.Context(), o, stdout, stderr)
		},
	}
	root.AddCommand(up, down, imgs, status)
	return root
}

// resolveRoot finds the repository: $CAPX_ROOT (hack/quickstart.sh sets it) or the working
// directory.
func resolveRoot(o *options) error {
	o.root = os.Getenv("CAPX_ROOT")
	if o.root == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		o.root = wd
	}
	if _, err := os.Stat(filepath.Join(o.root, "go.mod")); err != nil {
		return fmt.Errorf("%s is not the repository: run from its root or set CAPX_ROOT", o.root)
	}
	return nil
}

// steps prints numbered progress headers with the time each step took.
type steps struct {
	w     io.Writer
	total int
	n     int
	start time.Time
	last  time.Time
	name  string
}

func (s *steps) next(name string) {
	s.done()
	s.n++
	s.name, s.last = name, time.Now()
	fmt.Fprintf(s.w, "\n\033[1m==> [%d/%d] %s\033[0m\n", s.n, s.total, name)
}

func (s *steps) done() {
	if s.name != "" {
		fmt.Fprintf(s.w, "    %s: %.0fs\n", s.name, time.Since(s.last).Seconds())
	}
}

const (
	captfSample = quickstart.CAPTFSample
	vcoSample   = quickstart.VCOSample
)

func runUp(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	p := install.DefaultPaths(o.root)
	st := &steps{w: stderr, total: 5, start: time.Now()}

	st.next("images and components (built from this checkout; reused when unchanged)")
	kit, err := install.NewKit(ctx, p, stderr)
	if err != nil {
		return err
	}

	st.next("local management cluster " + o.name)
	c, err := localcluster.Up(ctx, localcluster.Options{Name: o.name, Progress: stderr})
	if err != nil {
		return err
	}
	var m *install.Management
	fail := func(err error) error {
		if m != nil {
			dir := filepath.Join(o.root, "_artifacts", "quickstart")
			_ = os.RemoveAll(dir)
			if aerr := artifacts.Collect(context.WithoutCancel(ctx), m, kit.Repository, dir); aerr != nil {
				fmt.Fprintln(stderr, aerr)
			}
			fmt.Fprintf(stderr, "\nobjects, pod and daemon logs: %s\n", dir)
		}
		fmt.Fprintf(stderr, "the cluster is still up for debugging (KUBECONFIG=%s); `make quickstart-down` removes it\n", c.Kubeconfig())
		return err
	}

	st.next("Cluster API " + kit.Components.CAPIVersion + " and the capx providers (" + o.flow + ")")
	if m, err = kit.Install(ctx, c, install.Flow(o.flow)); err != nil {
		return fail(err)
	}

	st.next("whitesky.cloud simulator in the cluster, and on the host's loopback")
	sim, err := quickstart.DeploySimulator(ctx, m, kit, o.namespace, func(format string, a ...any) {
		fmt.Fprintf(stderr, "    "+format+"\n", a...)
	})
	if err != nil {
		return fail(err)
	}

	st.next("sample clusters in namespace " + o.namespace + ", provisioned")
	if err := quickstart.Samples(ctx, m, kit, o.namespace); err != nil {
		return fail(err)
	}
	st.done()

	for _, name := range []string{captfSample, vcoSample} {
		out, err := m.Describe(ctx, kit.Repository, o.namespace, name)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "\n$ clusterctl describe cluster %s -n %s\n%s", name, o.namespace, out)
	}
	if err := showPlugins(ctx, o, c, stdout); err != nil {
		return fail(err)
	}
	if _, err := quickstart.InstallCompletionShims(filepath.Join(o.root, "bin")); err != nil {
		return fail(err)
	}
	printNext(stdout, o, c, kit, sim, upTime(time.Now(), st.start, os.Getenv(startedEnv)))
	return nil
}

// startedEnv is when hack/quickstart.sh started (Unix seconds): the toolchain, the Debian
// packages and this command's own build come before this command runs.
const startedEnv = "CAPX_QUICKSTART_STARTED"

// upTime says how long the quickstart took and what the time covers: from the script's start
// (started, Unix seconds; "" when this command was run by hand) to now, and the part this
// command's steps took (since stepsStart).
func upTime(now, stepsStart time.Time, started string) string {
	steps := now.Sub(stepsStart).Round(time.Second)
	sec, err := strconv.ParseInt(started, 10, 64)
	if err != nil || sec <= 0 || time.Unix(sec, 0).After(stepsStart) {
		return fmt.Sprintf("in %s: steps 1-5, images to provisioned samples", steps)
	}
	total := now.Sub(time.Unix(sec, 0)).Round(time.Second)
	return fmt.Sprintf("in %s since hack/quickstart.sh up started: toolchain, Debian packages and builds %s, then steps 1-5 (images to provisioned samples) %s",
		total, total-steps, steps)
}

// showPlugins runs the operator plugins through the real kubectl, from PATH, as an operator
// would after `krew install`: the CAPTF objects with their runs and state, then the CAPVCO
// cloudspaces, load balancer and machines. hack/quickstart.sh builds them into bin/.
func showPlugins(ctx context.Context, o *options, c *localcluster.Cluster, stdout io.Writer) error {
	bin := filepath.Join(o.root, "bin")
	for _, args := range [][]string{
		{"captf", "status", captfSample, "-n", o.namespace},
		{"capvco", "status", vcoSample, "-n", o.namespace},
	} {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		fmt.Fprintf(stdout, "\n$ kubectl %s\n%s", strings.Join(args, " "), out)
	}
	return nil
}

func printNext(w io.Writer, o *options, c *localcluster.Cluster, kit *install.Kit, sim *quickstart.Simulator, took string) {
	rel := func(p string) string {
		if r, err := filepath.Rel(o.root, p); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
		return p
	}
	fmt.Fprintf(w, `
The quickstart is up. The CAPTF cluster %[2]q ran real OpenTofu Jobs on the node, with
state in Secrets; its Machines have provider IDs but no Nodes, because the test modules create
no real machines (they only keep terraform_data in their state). The CAPVCO cluster %[3]q
is provisioned on the in-cluster whitesky.cloud simulator: a cloudspace, the control-plane load
balancer, a control-plane VM, a worker VM and a GPU worker VM with its vGPU reservation. The
simulated VMs run no API server, so the control plane stays out of the load balancer's pool.

Try:
  export KUBECONFIG=%[4]s
  export CLUSTERCTL_DISABLE_VERSIONCHECK=true
  bin/kubectl get clusters,terraformclusters,terraformmachines,terraformmachinepools,vcoclusters,vcomachines -n %[5]s
  bin/clusterctl describe cluster %[3]s -n %[5]s --show-conditions all --config %[6]s
  export PATH=$PWD/bin:$PATH                          # the kubectl plugins, as krew would install them
  source <(bin/kubectl completion bash)               # then: kubectl captf <TAB> (bin/kubectl_complete-captf, -capvco)
  kubectl captf status -A                             # CAPTF objects, runs, state serials, pending plans
  kubectl captf plan list -A                          # plans waiting for approval (kubectl captf approve)
  kubectl captf backups list %[2]s -n %[5]s          # state backups, restorable ones marked
  kubectl capvco status %[3]s -n %[5]s                # cloudspaces, load balancer pool, VMs, vGPUs
  bin/kubectl get jobs -n %[5]s                       # one Job per OpenTofu run
  bin/clusterctl describe cluster %[2]s -n %[5]s --show-conditions all --config %[6]s
  bin/kubectl patch terraformcluster %[2]s -n %[5]s --type merge -p '{"spec":{"variables":{"failure_domains":["fd-a","fd-b","fd-c"]}}}'
                                                      # a new apply Job; Cluster.status.failureDomains grows
  bin/kubectl scale machinedeployment %[2]s-md-0 -n %[5]s --replicas 3   # one more TerraformMachine
  bin/kubectl delete cluster %[2]s -n %[5]s           # destroy Jobs, then the objects go
  bin/kubectl get secret %[7]s -n %[5]s -o yaml       # the simulator's credentials (from its log)
  . %[9]s; capvco-gpucheck -orphans                   # the simulator from this host: %[10]s (docs/runbooks/gpu-orphans.md)
  hack/cluster status --name %[8]s; hack/cluster logs --name %[8]s kubelet --tail 20

Stop it with: make quickstart-down
Up %[1]s.
`, took, captfSample, vcoSample, c.Kubeconfig(), o.namespace, rel(kit.Repository.Config()),
		install.SimulatorSecret, o.name, rel(sim.EnvFile), sim.HostURL)
}

func runDown(ctx context.Context, o *options, stderr io.Writer) error {
	if err := localcluster.Down(ctx, localcluster.Options{Name: o.name, Progress: stderr}); err != nil {
		return err
	}
	left, err := localcluster.Leftovers(localcluster.Options{Name: o.name})
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("left behind: %s", strings.Join(left, "; "))
	}
	if o.purge {
		for _, d := range []string{"images", "install", "quickstart"} {
			if err := os.RemoveAll(filepath.Join(o.root, "_artifacts", d)); err != nil {
				return err
			}
		}
		fmt.Fprintln(stderr, "removed _artifacts/images, _artifacts/install and _artifacts/quickstart")
	}
	fmt.Fprintf(stderr, "quickstart %s is down; nothing of it runs (its daemon logs stay in _artifacts/clusters/%s/logs)\n", o.name, o.name)
	return nil
}

func runStatus(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	c, err := localcluster.Open(localcluster.Options{Name: o.name, Progress: stderr})
	if err != nil {
		return err
	}
	s := c.Status(ctx)
	if !s.Up() {
		return fmt.Errorf("quickstart %s is not up (hack/cluster status --name %s says why)", o.name, o.name)
	}
	p := install.DefaultPaths(o.root)
	m, err := install.Connect(c, p, stderr)
	if err != nil {
		return err
	}
	repo := install.OpenRepository(p)
	for _, name := range []string{captfSample, vcoSample} {
		out, err := m.Describe(ctx, repo, o.namespace, name)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "$ clusterctl describe cluster %s -n %s\n%s\n", name, o.namespace, out)
	}
	return showPlugins(ctx, o, c, stdout)
}
