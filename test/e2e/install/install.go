// Package install puts Cluster API core, the capx providers, the whitesky.cloud simulator and
// sample clusters on a local management cluster (test/localcluster), the way a user would, with
// nothing downloaded: every image is built here (test/images) and imported into the node.
//
// Two install flows, both offline:
//
//   - InstallManifests applies rendered components with kubectl (Cluster API core from the
//     cluster-api module's own kustomize tree, the providers from config/local) and registers the
//     clusterctl inventory itself, labelling every object as clusterctl would.
//   - InstallWithClusterctl runs the real `clusterctl init` against a local provider repository
//     (file:// URLs in a clusterctl config) written from the same components.
//
// Neither runs cert-manager, whose images cannot be pulled here: WithoutCertManager does its work
// ahead of time (serving certificates, caBundle injection), and clusterctl's cert-manager check
// is satisfied by a stub that only defines the two cert-manager kinds it probes (see
// certManagerStub).
package install

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/scheme"
	"github.com/capx-io/capx/test/images"
	"github.com/capx-io/capx/test/localcluster"
)

// Paths locate the repository, its toolchain and the folder the installers write to.
type Paths struct {
	// Root is the repository.
	Root string
	// BinDir holds kubectl and clusterctl (hack/toolchain.sh all). Default <Root>/bin.
	BinDir string
	// WorkDir receives the webhook certificates, the rendered components and the clusterctl
	// repository. Default <Root>/_artifacts/install.
	WorkDir string
}

// DefaultPaths are the paths of a repository checkout.
func DefaultPaths(root string) Paths {
	return Paths{Root: root, BinDir: filepath.Join(root, "bin"), WorkDir: filepath.Join(root, "_artifacts", "install")}
}

// Kubectl is the path of kubectl.
func (p Paths) Kubectl() string { return filepath.Join(p.BinDir, "kubectl") }

// Clusterctl is the path of clusterctl.
func (p Paths) Clusterctl() string { return filepath.Join(p.BinDir, "clusterctl") }

// Require fails naming what is missing when the toolchain lacks a tool the installers run.
func (p Paths) Require() error {
	var missing []string
	for _, tool := range []string{"kubectl", "clusterctl", "tofu", "capi-manager"} {
		if _, err := os.Stat(filepath.Join(p.BinDir, tool)); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s missing from %s: run `bash hack/toolchain.sh all` (builds them once per machine)", strings.Join(missing, ", "), p.BinDir)
	}
	return nil
}

// Management is a running local cluster the installers work on.
type Management struct {
	*localcluster.Cluster
	// Client reads and writes every kind the toolkit knows (internal/scheme).
	Client client.Client
	// Config is the admin REST config.
	Config   *rest.Config
	Paths    Paths
	Progress io.Writer
}

// Connect wraps a running cluster.
func Connect(c *localcluster.Cluster, p Paths, progress io.Writer) (*Management, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	if progress == nil {
		progress = os.Stderr
	}
	return &Management{Cluster: c, Client: cl, Config: cfg, Paths: p, Progress: progress}, nil
}

func (m *Management) logf(format string, args ...any) {
	fmt.Fprintf(m.Progress, "[install %s] %s\n", m.Name(), fmt.Sprintf(format, args...))
}

// Kubectl runs kubectl against the cluster with stdin (may be nil) and returns its stdout.
func (m *Management) Kubectl(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	return runIn(ctx, stdin, []string{"KUBECONFIG=" + m.Kubeconfig()}, m.Paths.Kubectl(), args...)
}

// Apply applies a manifest server-side (CRDs are too large for the client-side annotation). A
// webhook that does not answer yet (its manager starting, or restarted after a liveness probe
// timed out on a loaded 2-core machine, which takes over a minute) is retried for three minutes.
func (m *Management) Apply(ctx context.Context, what string, manifest []byte) error {
	start := time.Now()
	for {
		_, err := m.Kubectl(ctx, manifest, "apply", "--server-side", "--force-conflicts", "--field-manager=capx-install", "-f", "-")
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "failed calling webhook") || time.Since(start) > 3*time.Minute {
			return fmt.Errorf("apply %s: %w", what, err)
		}
		m.logf("apply %s: a webhook does not answer yet; retrying", what)
		select {
		case <-ctx.Done():
			return fmt.Errorf("apply %s: %w (last: %v)", what, ctx.Err(), err)
		case <-time.After(2 * time.Second):
		}
	}
	m.logf("applied %s (%.1fs)", what, time.Since(start).Seconds())
	return nil
}

// LoadImages imports the images the cluster's containerd does not hold yet. Content tags make
// "already there" mean "the same image".
func (m *Management) LoadImages(ctx context.Context, imgs []images.Built) error {
	have, err := images.List(ctx, m.ContainerdAddress())
	if err != nil {
		return err
	}
	for _, img := range imgs {
		if slices.Contains(have, img.Ref) {
			continue
		}
		start := time.Now()
		if err := m.LoadImage(ctx, img.Tarball); err != nil {
			return err
		}
		m.logf("imported %s (%.1fs)", img.Ref, time.Since(start).Seconds())
	}
	return nil
}
