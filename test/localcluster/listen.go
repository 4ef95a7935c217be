package localcluster

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// NodeIP is the node's address inside the cluster's namespace: the CNI bridge's, so every pod
// reaches it.
func (c *Cluster) NodeIP() string { return c.l.NodeIP }

// ServiceCIDR is the cluster's Service range (Options.ServiceCIDR, or the slot's default).
func (c *Cluster) ServiceCIDR() string { return c.l.ServiceCIDR }

// Listen opens a TCP listening socket on the node's address and port inside the cluster's
// network namespace, for a server that runs on the host: the reverse of the API server
// forwarder. The socket belongs to the cluster's namespace for its whole life, wherever the
// process serving it runs, so pods (and the node's daemons) connect to NodeIP():port and the
// host process accepts; nothing is routed between the namespaces and no packet leaves the
// cluster's namespace other than through a connection a pod opened to this socket. Serving the
// same handler on the Listen sockets of two clusters gives both the same backend, e.g. one
// simulator whose state both management clusters of a clusterctl move see.
//
// The socket is created by a goroutine that locks its OS thread, switches that thread to the
// cluster's namespace and never switches it back: the runtime discards a thread whose goroutine
// exits while locked, so no other goroutine ever runs in the cluster's namespace.
func (c *Cluster) Listen(port int) (net.Listener, error) {
	if err := requireRoot(); err != nil {
		return nil, err
	}
	ns, err := os.Open(c.l.netnsPath())
	if err != nil {
		return nil, fmt.Errorf("network namespace of cluster %s: %w", c.l.Name, err)
	}
	defer ns.Close()
	addr := net.JoinHostPort(c.l.NodeIP, strconv.Itoa(port))
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("entering network namespace %s: %w", c.l.NetNS, err)}
			return
		}
		ln, err := net.Listen("tcp", addr)
		done <- result{ln, err}
	}()
	r := <-done
	if r.err != nil {
		return nil, fmt.Errorf("listening on %s in cluster %s: %w", addr, c.l.Name, r.err)
	}
	return r.ln, nil
}
