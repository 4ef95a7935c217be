// Command kubectl-capvco is the kubectl capvco plugin (see `kubectl capvco --help`). Installed
// on PATH as kubectl-capvco, kubectl runs it for `kubectl capvco ...`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/capx-io/capx/internal/cli/capvco"
	"github.com/capx-io/capx/internal/cli/capvco/gpucheck"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	streams := cmdutil.SystemIOStreams()
	root := capvco.NewRoot(cmdutil.NewFactory(streams, capvco.Name))
	root.SetContext(ctx)
	code := cmdutil.Execute(root, streams, gpucheck.NormalizeArgs(root, os.Args[1:]))
	stop()
	os.Exit(int(code))
}
