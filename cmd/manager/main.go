// Command manager reconciles the CAPTF and CAPVCO infrastructure providers; `manager runner` is
// the entrypoint of every CAPTF Job.
package main

import (
	"fmt"
	"os"

	"github.com/capx-io/capx/internal/manager"
)

func main() {
	if err := manager.NewCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
