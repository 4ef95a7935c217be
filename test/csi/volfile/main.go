// Command volfile is the workload of test/csi's Pods: it writes a file on a volume and makes it
// durable (fsync of the file and its folder), or prints a file back, so that the test can tell
// whether data written on one node is there on another, or in a restored snapshot.
//
//	volfile write /data/marker "some text"
//	volfile hold /data/marker "some text"   # writes, then keeps the volume in use until SIGTERM
//	volfile read /data/marker
//	volfile show /data/marker               # prints it and a newline, then keeps the volume in use until SIGTERM
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "volfile:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	switch {
	case len(args) == 3 && args[0] == "write":
		return write(args[1], args[2])
	case len(args) == 3 && args[0] == "hold":
		if err := write(args[1], args[2]); err != nil {
			return err
		}
		holdUntilStopped()
		return nil
	case len(args) == 2 && args[0] == "read":
		return show(args[1])
	case len(args) == 2 && args[0] == "show":
		if err := show(args[1]); err != nil {
			return err
		}
		// The container runtime writes a log line once it ends: without the newline the Pod's
		// log stays empty while it runs.
		fmt.Println()
		holdUntilStopped()
		return nil
	}
	return fmt.Errorf("usage: volfile write|hold PATH TEXT | volfile read|show PATH (got %q)", args)
}

// holdUntilStopped is a running workload: its volume stays mounted (and attached) until the
// Pod is stopped, so that the test can look at the attachment while it is in use.
func holdUntilStopped() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}

func show(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(b)
	return err
}

// write leaves the text on the disk, not only in the page cache: the test reads the raw
// device and snapshots the disk while the file system may still be mounted.
func write(path, text string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return err
	}
	fmt.Println("wrote", path)
	return nil
}
