// Command kubectl-captf is the kubectl plugin for CAPTF: `kubectl captf ...`.
package main

import (
	"os"

	"github.com/capx-io/capx/internal/cli/captf"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

func main() {
	streams := cmdutil.SystemIOStreams()
	f := cmdutil.NewFactory(streams, captf.Name)
	os.Exit(int(cmdutil.Execute(captf.NewRoot(f), streams, os.Args[1:])))
}
