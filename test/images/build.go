package images

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// GoBuildStatic builds a Go main package of this module (or any package the module can resolve)
// into a static linux binary at out, for images that have no libc. It runs the go command in
// moduleDir (the current directory when empty), so it needs the Go toolchain (tests and hack/
// scripts have it).
func GoBuildStatic(ctx context.Context, moduleDir, pkg, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return goBuild(ctx, moduleDir, out, pkg)
}

// GoBuildStaticInto builds several main packages in one go command (they share its package
// loading and compile work) into static binaries in outDir, each named after its package's last
// path element.
func GoBuildStaticInto(ctx context.Context, moduleDir, outDir string, pkgs ...string) error {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	return goBuild(ctx, moduleDir, outDir+string(filepath.Separator), pkgs...)
}

func goBuild(ctx context.Context, moduleDir, out string, pkgs ...string) error {
	args := append([]string{"build", "-trimpath", "-ldflags=-s -w", "-o", out}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=-buildvcs=false")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", strings.Join(pkgs, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
