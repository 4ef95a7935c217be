// Command pause is the sandbox ("pause") process of every pod on the local cluster: it holds the
// pod's namespaces open, reaps orphaned children when it is the pod's PID 1, and exits on
// SIGINT or SIGTERM. It is built static and shipped as capx.local/pause by test/images.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		// With a shared PID namespace, orphans of other containers are re-parented to us.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
