//go:build e2e

package localcluster

import (
	"context"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/capx-io/capx/test/images"
)

// TestForwardReachesTheNamespace: a server inside a namespace of its own (on its loopback, which
// the host cannot reach) answers a client on the host's loopback through Forward; replacing the
// forward keeps one forwarder.
func TestForwardReachesTheNamespace(t *testing.T) {
	ctx := context.Background()
	const ns = "capx-forwardtest"
	if exists(netnsDir + "/" + ns) {
		_, _ = run(ctx, "ip", "netns", "delete", ns)
	}
	if _, err := run(ctx, "ip", "netns", "add", ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = run(context.Background(), "ip", "netns", "delete", ns) })
	if _, err := run(ctx, "ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
		t.Fatal(err)
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := &Cluster{l: layout{Name: "forwardtest", Dir: dir, NetNS: ns, NodeIP: "127.0.0.1"}, progress: io.Discard}
	for _, d := range []string{c.l.runDir(), c.l.logDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := images.GoBuildStatic(ctx, root, forwarderPackage, c.l.path("bin", "forwarder")); err != nil {
		t.Fatal(err)
	}
	ln, err := c.Listen(0) // 127.0.0.1:<port> inside the namespace
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = conn.Write([]byte("inside"))
			conn.Close()
		}
	}()
	t.Cleanup(func() { _ = stopDaemon(c.l, "forward-test") })
	for range 2 { // the second replaces the first
		addr, err := c.Forward(ctx, "test", 0, ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %s on the host: %v\n%s", addr, err, tail(c.l.logFile("forward-test"), 10))
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(conn)
		conn.Close()
		if string(b) != "inside" {
			t.Fatalf("read %q (%v) through %s, want the namespace's server\n%s", b, err, addr, tail(c.l.logFile("forward-test"), 10))
		}
	}
	if pid := daemonPID(c.l, "forward-test"); pid == 0 {
		t.Fatal("no forwarder runs")
	}
}
