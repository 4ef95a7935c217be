package localcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

// Forward makes an address inside the cluster's network namespace (a Service's ClusterIP:port,
// say) reachable from the host at 127.0.0.1:hostPort, the way the API server is: a listening
// socket bound on the host's loopback, handed to a forwarder that runs inside the namespace and
// dials to for every connection. It carries only connections the host opens on its loopback;
// nothing is routed between the namespaces. hostPort 0 picks a free port. It returns the host
// address.
//
// The forwarder is a daemon named "forward-<name>" (its log is logs/forward-<name>.log); a
// second Forward of the same name replaces it, and Down stops it with every other process in
// the namespace.
func (c *Cluster) Forward(ctx context.Context, name string, hostPort int, to string) (string, error) {
	if err := requireRoot(); err != nil {
		return "", err
	}
	l := c.l
	forwarder := l.path("bin", "forwarder")
	if _, err := os.Stat(forwarder); err != nil {
		return "", fmt.Errorf("cluster %s has no forwarder binary (%w): it was started by an older harness; restart it with hack/cluster down and up", l.Name, err)
	}
	d := forwardDaemon(name, to)
	if err := stopDaemon(l, d.name); err != nil {
		return "", err
	}
	ln, err := listenLoopback(ctx, hostPort)
	if err != nil {
		return "", fmt.Errorf("forward %s: %w", name, err)
	}
	addr := ln.Addr().String()
	lnFile, err := ln.(*net.TCPListener).File()
	_ = ln.Close() // the duplicate in lnFile keeps the socket listening
	if err != nil {
		return "", err
	}
	defer lnFile.Close()
	c.logf("forwarding %s (host loopback) to %s in the cluster's namespace", addr, to)
	if _, err := startDaemon(l, d, forwarder, lnFile); err != nil {
		return "", err
	}
	return addr, nil
}

// forwardDaemon is the forwarder daemon of Forward: its args name the cluster's folder, as
// every daemon's do, so that its PID file is checked against the cluster.
func forwardDaemon(name, to string) daemon {
	return daemon{name: "forward-" + name, args: func(l layout) []string {
		return []string{"--cluster-dir", l.Dir, "--to", to}
	}}
}

// listenLoopback listens on the host's 127.0.0.1:port, retrying for a few seconds while the
// port is still held by the forwarder being replaced.
func listenLoopback(ctx context.Context, port int) (net.Listener, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil || time.Now().After(deadline) {
			return ln, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// APIServerPort is the host loopback port the API server is reached on.
func (c *Cluster) APIServerPort() int { return c.l.APIServerPort }
