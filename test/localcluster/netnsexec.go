package localcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// inNetNS runs f on an OS thread switched into the network namespace at path. A socket belongs
// to the namespace it is created in for its whole life, so a listener or connection made by f
// stays there wherever it is used later. The thread is switched back before other goroutines
// may run on it; if that fails it stays locked, and the runtime discards a thread whose
// goroutine exits locked, so no other goroutine ever runs in the wrong namespace.
func inNetNS(path string, f func() error) error {
	target, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", path, err)
	}
	defer target.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer self.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("entering network namespace %s: %w", path, err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("leaving network namespace %s: %w", path, err) // the thread stays locked and goes
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

// listenIn opens a TCP listening socket on addr inside the namespace at path.
func listenIn(path, addr string) (net.Listener, error) {
	var ln net.Listener
	err := inNetNS(path, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	return ln, err
}

// dialIn opens a connection from inside the namespace at path.
func dialIn(ctx context.Context, path, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := inNetNS(path, func() (err error) {
		var d net.Dialer
		conn, err = d.DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}
