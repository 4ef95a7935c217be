// Command manager reconciles the CAPTF and CAPVCO infrastructure providers. Invoked under the
// name "runner" (a CAPTF Job's init container copies this binary to /captf/bin/runner), it is
// the Job's runner instead: the runner is always the manager's own build.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/capx-io/capx/internal/captf/runner"
	"github.com/capx-io/capx/internal/manager"
)

func main() {
	io := runner.IO{Out: os.Stdout}
	if filepath.Base(os.Args[0]) == "runner" {
		cmd := runner.NewCommand(io)
		cmd.SetArgs(os.Args[1:])
		os.Exit(runner.ExitCode(cmd.Execute()))
	}
	err := manager.NewCommand(runner.NewCommand(io)).Execute()
	var exit *runner.ExitError
	if err != nil && !errors.As(err, &exit) {
		fmt.Fprintln(os.Stderr, "Error:", err)
	}
	os.Exit(runner.ExitCode(err))
}
