// Command capvco-gpucheck finds the vGPU reservations CAPVCO no longer owns (billed until they
// are released) and releases them. `capvco-gpucheck -location <location> -orphans` exits 1 when
// there are any; see `capvco-gpucheck --help` and docs/runbooks/gpu-orphans.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/capx-io/capx/internal/cli/capvco/gpucheck"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	streams := cmdutil.SystemIOStreams()
	root := gpucheck.NewStandalone(cmdutil.NewFactory(streams, gpucheck.StandaloneName))
	root.SetContext(ctx)
	code := cmdutil.Execute(root, streams, gpucheck.NormalizeArgs(root, os.Args[1:]))
	stop()
	os.Exit(int(code))
}
