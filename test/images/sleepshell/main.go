// Command sleepshell stands in for /bin/sh in module images that have no shell, for exactly one
// use: the test modules' opt-in `slow` variable, a local-exec provisioner whose command is
// `exec sleep N` (OpenTofu runs it as `/bin/sh -c "exec sleep N"`). It sleeps N seconds and exits
// 0, or exits 128+signal on SIGINT or SIGTERM, as sleep would. Anything else is refused with exit
// 127, so a module that needs a real shell fails loudly instead of being silently skipped.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) != 2 || args[0] != "-c" {
		fmt.Fprintf(os.Stderr, "sleepshell: only `sh -c \"[exec] sleep SECONDS\"` is supported, got %q\n", args)
		return 127
	}
	fields := strings.Fields(args[1])
	if len(fields) > 0 && fields[0] == "exec" {
		fields = fields[1:]
	}
	if len(fields) != 2 || fields[0] != "sleep" {
		fmt.Fprintf(os.Stderr, "sleepshell: only `[exec] sleep SECONDS` is supported, got %q\n", args[1])
		return 127
	}
	secs, err := strconv.ParseFloat(fields[1], 64)
	if err != nil || secs < 0 {
		fmt.Fprintf(os.Stderr, "sleepshell: sleep: invalid time interval %q\n", fields[1])
		return 1
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-time.After(time.Duration(secs * float64(time.Second))):
		return 0
	case s := <-sigs:
		return 128 + int(s.(syscall.Signal))
	}
}
