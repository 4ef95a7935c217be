// Command capvco-external-dns-webhook is the whitesky.cloud DNS provider of ExternalDNS:
// internal/capvco/externaldns.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/capx-io/capx/internal/capvco/externaldns"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := externaldns.NewCommand(ctx).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "capvco-external-dns-webhook:", err)
		stop()
		os.Exit(1)
	}
}
