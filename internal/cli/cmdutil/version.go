package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/version"
)

// ManagerNamespace is where the manager runs when installed from the project's manifests.
const ManagerNamespace = "capx-system"

// managerSelector selects the manager's Deployment (config/manager).
var managerSelector = client.MatchingLabels{"app.kubernetes.io/name": "capx", "app.kubernetes.io/component": "manager"}

// Version is the printed shape of every version command (kind Version).
type Version struct {
	TypeMeta `json:",inline"`
	// Binary is the program that printed it ("kubectl-captf", "manager").
	Binary string `json:"binary"`
	// Build is the binary's own version.
	Build version.Info `json:"build"`
	// Manager is the manager found in the cluster, if asked for and reachable.
	Manager *ManagerVersion `json:"manager,omitempty"`
	// Warnings are version skew and why the manager could not be found.
	Warnings []string `json:"warnings,omitempty"`
}

// ManagerVersion is what the cluster says about the running manager.
type ManagerVersion struct {
	Namespace  string `json:"namespace"`
	Deployment string `json:"deployment"`
	Image      string `json:"image"`
	// Version is the Deployment's app.kubernetes.io/version label, else the image tag.
	Version string `json:"version"`
}

// FindManager reads the manager's Deployment in namespace.
func FindManager(ctx context.Context, c client.Reader, namespace string) (*ManagerVersion, error) {
	var list appsv1.DeploymentList
	if err := c.List(ctx, &list, client.InNamespace(namespace), managerSelector); err != nil {
		return nil, fmt.Errorf("list the manager's Deployment in %s: %w", namespace, err)
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("no manager Deployment (app.kubernetes.io/name=capx,app.kubernetes.io/component=manager) in namespace %s; try --manager-namespace", namespace)
	}
	d := list.Items[0]
	m := &ManagerVersion{Namespace: d.Namespace, Deployment: d.Name, Version: d.Labels["app.kubernetes.io/version"]}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "manager" || m.Image == "" {
			m.Image = c.Image
		}
	}
	if m.Version == "" {
		m.Version = imageTag(m.Image)
	}
	return m, nil
}

func imageTag(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[i+1:]
	}
	return ""
}

// Skew returns a warning when a and b differ in major or minor version (both "vX.Y.Z"), or ""
// when they match or either cannot be compared.
func Skew(plugin, manager string) string {
	pm, ok1 := majorMinor(plugin)
	mm, ok2 := majorMinor(manager)
	if !ok1 || !ok2 || pm == mm {
		return ""
	}
	return fmt.Sprintf("version skew: this binary is %s and the manager is %s; use a binary of the manager's minor version", plugin, manager)
}

func majorMinor(v string) (string, bool) {
	v = strings.TrimPrefix(v, "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return "", false
	}
	for _, p := range parts[:2] {
		for _, r := range p {
			if r < '0' || r > '9' {
				return "", false
			}
		}
	}
	return parts[0] + "." + parts[1], true
}

// VersionOptions are the version command's inputs.
type VersionOptions struct {
	IO     *IOStreams
	Binary string
	Output Format
	// ClientOnly skips the cluster.
	ClientOnly       bool
	ManagerNamespace string
	Timeout          time.Duration
	// Client is nil for binaries that have no cluster to ask (the manager itself).
	Client func() (client.WithWatch, error)
}

// NewCmdVersion returns the version command of a plugin: its own build and, unless --client,
// the manager's version from the cluster with a skew warning. An unreachable cluster is a
// warning, not an error. f may be nil for a binary without a cluster (the manager).
func NewCmdVersion(f *Factory, binary string, runF func(*VersionOptions) error) *cobra.Command {
	opts := &VersionOptions{Binary: binary, ManagerNamespace: ManagerNamespace, Timeout: 5 * time.Second}
	if f != nil {
		opts.IO = f.IO
		opts.Client = f.Client
	}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version (and the manager's, when the cluster is reachable)",
		Example: `  # this binary and the manager in the current context
  ` + displayName(binary) + ` version

  # only this binary, never contacting a cluster; as JSON for scripts
  ` + displayName(binary) + ` version --client -o json`,
		Args: NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.IO == nil {
				opts.IO = &IOStreams{In: cmd.InOrStdin(), Out: cmd.OutOrStdout(), ErrOut: cmd.ErrOrStderr()}
			}
			if runF != nil {
				return runF(opts)
			}
			return RunVersion(cmd.Context(), opts)
		},
	}
	AddOutputFlag(cmd, &opts.Output, Text, JSON, YAML)
	if f != nil {
		cmd.Flags().BoolVar(&opts.ClientOnly, "client", false, "Print only this binary's version; do not contact the cluster.")
		cmd.Flags().StringVar(&opts.ManagerNamespace, "manager-namespace", ManagerNamespace, "Namespace the manager runs in.")
	}
	return cmd
}

func displayName(binary string) string {
	if rest, ok := strings.CutPrefix(binary, "kubectl-"); ok {
		return "kubectl " + rest
	}
	return binary
}

// RunVersion prints the version.
func RunVersion(ctx context.Context, opts *VersionOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	v := Version{TypeMeta: Meta("Version"), Binary: opts.Binary, Build: version.Get()}
	if opts.Client != nil && !opts.ClientOnly {
		m, err := findManager(ctx, opts)
		if err != nil {
			v.Warnings = append(v.Warnings, "manager version unknown: "+err.Error())
		} else {
			v.Manager = m
			if w := Skew(v.Build.Version, m.Version); w != "" {
				v.Warnings = append(v.Warnings, w)
			}
		}
	}
	return Print(opts.IO.Out, opts.Output, v, func() error {
		fmt.Fprintf(opts.IO.Out, "%s %s\n", opts.Binary, v.Build.String())
		if v.Manager != nil {
			fmt.Fprintf(opts.IO.Out, "manager %s (%s/%s, image %s)\n", v.Manager.Version, v.Manager.Namespace, v.Manager.Deployment, v.Manager.Image)
		}
		for _, w := range v.Warnings {
			fmt.Fprintln(opts.IO.ErrOut, "Warning:", w)
		}
		return nil
	})
}

func findManager(ctx context.Context, opts *VersionOptions) (*ManagerVersion, error) {
	c, err := opts.Client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	m, err := FindManager(ctx, c, opts.ManagerNamespace)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("the cluster did not answer within %s", opts.Timeout)
	}
	return m, err
}
