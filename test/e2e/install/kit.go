package install

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/capx-io/capx/test/images"
	"github.com/capx-io/capx/test/localcluster"
)

// Flow is how the providers get onto a cluster.
type Flow string

const (
	// FlowClusterctl runs `clusterctl init` with the local repository.
	FlowClusterctl Flow = "clusterctl"
	// FlowManifests applies the rendered components with kubectl and registers the inventory.
	FlowManifests Flow = "manifests"
)

// Kit is what every install needs, prepared once and shared by any number of clusters: the
// images, the rendered components and the clusterctl repository.
type Kit struct {
	Paths      Paths
	Images     *images.LocalSet
	Components *Components
	Repository *Repository
	Progress   io.Writer
}

// NewKit checks the toolchain, builds the images (or reuses unchanged ones), renders the
// components and writes the clusterctl repository under <WorkDir>/clusterctl.
func NewKit(ctx context.Context, p Paths, progress io.Writer) (*Kit, error) {
	if progress == nil {
		progress = os.Stderr
	}
	if err := p.Require(); err != nil {
		return nil, err
	}
	imgs, err := images.BuildLocal(ctx, images.LocalOptions{Root: p.Root, BinDir: p.BinDir, Progress: progress})
	if err != nil {
		return nil, err
	}
	comps, err := Render(ctx, p, imgs)
	if err != nil {
		return nil, err
	}
	repo, err := WriteRepository(p, OpenRepository(p).Dir, comps)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "[install] cluster-api %s and capx %s rendered; clusterctl config: %s\n", comps.CAPIVersion, comps.ProviderVersion, repo.Config())
	return &Kit{Paths: p, Images: imgs, Components: comps, Repository: repo, Progress: progress}, nil
}

// Install imports the images into a running cluster, installs Cluster API core and the
// providers with the given flow, and waits until both managers are available.
func (k *Kit) Install(ctx context.Context, c *localcluster.Cluster, flow Flow) (*Management, error) {
	m, err := Connect(c, k.Paths, k.Progress)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := m.LoadImages(ctx, k.Images.All()); err != nil {
		return nil, err
	}
	switch flow {
	case FlowClusterctl:
		err = m.InstallWithClusterctl(ctx, k.Repository, k.Images)
	case FlowManifests:
		err = m.InstallManifests(ctx, k.Components)
	default:
		err = fmt.Errorf("unknown install flow %q: %s or %s", flow, FlowClusterctl, FlowManifests)
	}
	if err != nil {
		return nil, err
	}
	if err := m.WaitProviders(ctx); err != nil {
		return nil, err
	}
	m.logf("cluster-api %s and capx %s installed with %s in %.1fs", k.Components.CAPIVersion, k.Components.ProviderVersion, flow, time.Since(start).Seconds())
	return m, nil
}
