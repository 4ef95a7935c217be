// Command capvco-sriov-agent is the node agent of the SR-IOV add-on: internal/capvco/sriov.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/capx-io/capx/internal/capvco/sriov"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := sriov.NewCommand(ctx).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "capvco-sriov-agent:", err)
		stop()
		os.Exit(1)
	}
}
