// Command captf-runner is the CAPTF runner on its own, for manual testing and the runner's
// process-level tests. Jobs run the same code as `manager runner ...`.
package main

import (
	"os"

	"github.com/capx-io/capx/internal/captf/runner"
)

func main() {
	cmd := runner.NewCommand(runner.IO{Out: os.Stdout})
	cmd.Use = "captf-runner"
	os.Exit(runner.ExitCode(cmd.Execute()))
}
