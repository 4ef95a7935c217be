//go:build e2e

package localcluster

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestCheckIsolationRefusesDefaultRoute builds a namespace with a default route through a second,
// port-less bridge inside it (nothing could leave, and no traffic is generated anyway) and checks
// that the check the harness runs before starting any daemon refuses it.
func TestCheckIsolationRefusesDefaultRoute(t *testing.T) {
	ctx := context.Background()
	const ns = "capx-isotest"
	if exists(netnsDir + "/" + ns) {
		_, _ = run(ctx, "ip", "netns", "delete", ns)
	}
	steps := [][]string{
		{"netns", "add", ns},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "link", "add", bridgeName, "type", "bridge"},
	}
	for _, s := range steps {
		if _, err := run(ctx, "ip", s...); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = run(context.Background(), "ip", "netns", "delete", ns) })
	if err := checkIsolation(ctx, ns); err != nil {
		t.Fatalf("lo and the bridge only: %v", err)
	}
	for _, s := range [][]string{
		{"-n", ns, "link", "add", "d0", "type", "bridge"},
		{"-n", ns, "addr", "add", "192.0.2.10/30", "dev", "d0"},
		{"-n", ns, "link", "set", "d0", "up"},
		{"-n", ns, "route", "add", "default", "via", "192.0.2.9", "dev", "d0"},
	} {
		if _, err := run(ctx, "ip", s...); err != nil {
			t.Fatal(err)
		}
	}
	err := checkIsolation(ctx, ns)
	if err == nil || !strings.Contains(err.Error(), "default route") || !strings.Contains(err.Error(), "unexpected interface d0") {
		t.Fatalf("want a refusal naming the default route and d0, got %v", err)
	}
	t.Log(err)
}

// TestListenStaysInTheNamespace opens a socket with Cluster.Listen in a namespace of its own
// and checks both sides of the promise: a client inside the namespace reaches the host's
// server through it, and the same address from the host reaches nothing (the socket is not in
// the host's namespace).
func TestListenStaysInTheNamespace(t *testing.T) {
	ctx := context.Background()
	const ns = "capx-listentest"
	if exists(netnsDir + "/" + ns) {
		_, _ = run(ctx, "ip", "netns", "delete", ns)
	}
	if _, err := run(ctx, "ip", "netns", "add", ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = run(context.Background(), "ip", "netns", "delete", ns) })
	// 127.0.0.2 is a local address in both namespaces, so the same address:port names the
	// socket inside and, from the host, whatever the host has there (normally nothing).
	if _, err := run(ctx, "ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{l: layout{Name: "listentest", NetNS: ns, NodeIP: "127.0.0.2"}}
	ln, err := c.Listen(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			served <- err.Error()
			return
		}
		defer conn.Close()
		b := make([]byte, 5)
		_, _ = io.ReadFull(conn, b)
		served <- string(b)
	}()
	addr := ln.Addr().String()
	// From the host: whatever answers there (normally nothing) is not this socket, whose first
	// connection must be the namespace's below.
	if conn, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		_, _ = conn.Write([]byte("host!"))
		conn.Close()
	}
	// From inside the namespace: the host's server answers.
	host, port, _ := net.SplitHostPort(addr)
	if out, err := run(ctx, "ip", "netns", "exec", ns, "bash", "-c", "echo -n hello >/dev/tcp/"+host+"/"+port); err != nil {
		t.Fatalf("from inside the namespace: %v %s", err, out)
	}
	select {
	case got := <-served:
		if got != "hello" {
			t.Fatalf("served %q, want the namespace's hello (\"host!\": the host reached the socket)", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server saw no connection from the namespace")
	}
}
