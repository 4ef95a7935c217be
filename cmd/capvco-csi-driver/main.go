// Command capvco-csi-driver is the CSI driver for whitesky.cloud disks in CAPVCO workload
// clusters: internal/capvco/csi.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/capx-io/capx/internal/capvco/csi"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := csi.NewCommand(ctx).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "capvco-csi-driver:", err)
		stop()
		os.Exit(1)
	}
}
