//go:build e2e

package localcluster

import (
	"context"
	"strings"
	"testing"
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
