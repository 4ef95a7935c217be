// Command forwarder is the local cluster's API server forwarder. test/localcluster starts it
// inside the cluster's network namespace and hands it, as file descriptor 3, a listening socket
// that was bound to the host's 127.0.0.1 in the host namespace. It accepts there and dials the
// API server on the namespace's own loopback: the one path from the host into the cluster, and
// one that carries nothing but connections the host opened on its loopback.
//
// It imports only the standard library so that it builds in a second, every time a cluster
// starts.
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

func main() {
	to := flag.String("to", "127.0.0.1:6443", "address to dial inside the namespace")
	// Only there so that the command line names the cluster (PID files are checked against it).
	dir := flag.String("cluster-dir", "", "the cluster's folder")
	flag.Parse()
	logger := log.New(os.Stderr, "", log.LstdFlags)
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		logger.Fatalf("no listening socket on fd 3: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger.Printf("forwarding %s (host loopback) to %s (cluster namespace) for %s", ln.Addr(), *to, *dir)
	if err := forward(ctx, ln, *to, logger); err != nil {
		logger.Fatal(err)
	}
}

// forward accepts connections on ln and copies each to a new connection to the address to,
// until ctx ends.
func forward(ctx context.Context, ln net.Listener, to string, logger *log.Logger) error {
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := pipe(ctx, conn, to); err != nil {
				logger.Printf("connection from %s: %v", conn.RemoteAddr(), err)
			}
		}()
	}
}

func pipe(ctx context.Context, in net.Conn, to string) error {
	defer in.Close()
	d := net.Dialer{Timeout: 5 * time.Second}
	out, err := d.DialContext(ctx, "tcp", to)
	if err != nil {
		return err
	}
	defer out.Close()
	stop := context.AfterFunc(ctx, func() { in.Close(); out.Close() })
	defer stop()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Half-close, so the other direction can still finish its response.
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(out, in)
	go cp(in, out)
	<-done
	<-done
	return nil
}
