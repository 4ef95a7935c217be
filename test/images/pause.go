package images

import (
	"context"
	"path/filepath"
)

// PauseRef is the sandbox image every local cluster's containerd is configured with
// (sandbox_image); the harness imports it under exactly this name before the kubelet starts.
const PauseRef = "capx.local/pause:1"

// PausePackage is the tiny static program the pause image runs.
const PausePackage = "github.com/capx-io/capx/test/images/pause"

// Pause builds the pause binary (running go in moduleDir, see GoBuildStatic) and writes the pause
// image tarball into dir, returning its path.
func Pause(ctx context.Context, moduleDir, dir string) (string, error) {
	bin := filepath.Join(dir, "pause")
	if err := GoBuildStatic(ctx, moduleDir, PausePackage, bin); err != nil {
		return "", err
	}
	tarPath := filepath.Join(dir, "pause.tar")
	return tarPath, WriteTarball(Spec{
		Ref:        PauseRef,
		Files:      []File{{Path: "/pause", Source: bin, Mode: 0o755}},
		Entrypoint: []string{"/pause"},
		User:       NonRootUser,
	}, tarPath)
}
