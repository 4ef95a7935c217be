// Command kubectl-captf is the kubectl plugin for CAPTF: `kubectl captf ...`. Installed on PATH as
// kubectl-captf, kubectl runs it for `kubectl captf ...`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/capx-io/capx/internal/cli/captf"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

func main() {
	// Ctrl-C ends a --wait cleanly: what was requested stays requested.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	streams := cmdutil.SystemIOStreams()
	root := captf.NewRoot(cmdutil.NewFactory(streams, captf.Name))
	root.SetContext(ctx)
	code := cmdutil.Execute(root, streams, os.Args[1:])
	stop()
	os.Exit(int(code))
}
