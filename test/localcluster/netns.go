package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// netnsDir is where `ip netns add` mounts named namespaces.
const netnsDir = "/run/netns"

// bridgeName is the CNI bridge. It lives inside the cluster's namespace, so every cluster can
// use the same name.
const bridgeName = "cni0"

// createNetNS creates the cluster's network namespace with exactly two interfaces: loopback and
// the CNI bridge (created here, with the node IP, so the kubelet and the API server can bind to
// it before the first pod exists). Its only routes are the pod subnet on the bridge and the
// service range, routed as local addresses: kube-proxy rewrites Service traffic in the
// namespace's own netfilter hooks, and before it has, a connection to a Service address ends
// here with "connection refused" instead of following a default route that does not exist.
func createNetNS(ctx context.Context, l layout) error {
	if exists(l.netnsPath()) {
		return fmt.Errorf("network namespace %s already exists: a previous cluster %q was not torn down (run hack/cluster down --name %s)", l.NetNS, l.Name, l.Name)
	}
	prefix, _ := netip.ParsePrefix(l.PodCIDR)
	steps := [][]string{
		{"netns", "add", l.NetNS},
		{"-n", l.NetNS, "link", "set", "lo", "up"},
		{"-n", l.NetNS, "link", "add", bridgeName, "type", "bridge"},
		{"-n", l.NetNS, "addr", "add", fmt.Sprintf("%s/%d", l.NodeIP, prefix.Bits()), "dev", bridgeName},
		{"-n", l.NetNS, "link", "set", bridgeName, "up"},
		{"-n", l.NetNS, "route", "add", "local", l.ServiceCIDR, "dev", "lo"},
	}
	for _, args := range steps {
		if _, err := run(ctx, "ip", args...); err != nil {
			return err
		}
	}
	return nil
}

// deleteNetNS removes the namespace, and with it the bridge, the pods' veth ends and every
// iptables rule kube-proxy and the kubelet wrote (they exist only inside it).
func deleteNetNS(ctx context.Context, l layout) error {
	if !exists(l.netnsPath()) {
		return nil
	}
	_, err := run(ctx, "ip", "netns", "delete", l.NetNS)
	return err
}

// route and link are the fields of `ip -j` output the isolation check reads.
type route struct {
	Dst     string `json:"dst"`
	Gateway string `json:"gateway"`
	Via     any    `json:"via"`
	Dev     string `json:"dev"`
	Table   string `json:"table"`
	Type    string `json:"type"`
}

type link struct {
	Name     string `json:"ifname"`
	Master   string `json:"master"`
	LinkType string `json:"link_type"`
	// PeerNSID is set for a veth whose other end is in another namespace.
	PeerNSID *int `json:"link_netnsid"`
	LinkInfo struct {
		Kind string `json:"info_kind"`
	} `json:"linkinfo"`
}

// checkIsolation refuses a namespace that could send a packet off the machine (see
// isolationProblems). It reads the namespace with `ip route` and `ip link`, and runs before any
// daemon starts, once the cluster is up, and in status.
func checkIsolation(ctx context.Context, netns string) error {
	routes, err := run(ctx, "ip", "-n", netns, "-j", "route", "show", "table", "all")
	if err != nil {
		return err
	}
	links, nsids, err := linksOf(ctx, netns)
	if err != nil {
		return err
	}
	problems, peers, err := isolationProblems(routes, links, nsids)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", netns, err)
	}
	if len(peers) > 0 {
		// An attached platform network (platform.go): everything reachable through it must be
		// as closed as this namespace is.
		more, err := closureProblems(ctx, append([]string{netns}, peers...))
		if err != nil {
			return err
		}
		problems = append(problems, more...)
	}
	if len(problems) > 0 {
		return fmt.Errorf("network namespace %s is not isolated, refusing to run a cluster in it: %s", netns, strings.Join(problems, "; "))
	}
	return nil
}

// isolationProblems reads `ip -j route show table all`, `ip -d -j link show` and
// `ip -j netns list-id` output and lists what could carry a packet off the machine: a default
// route or a route through a gateway (IPv4 or IPv6, in any routing table), or an interface other
// than loopback, the CNI bridge, the pods' veth ends enslaved to that bridge and veths to
// namespaces of the harness (capx-*, a platform network). It returns those namespaces too: the
// caller checks that they are closed (closureProblems).
func isolationProblems(routesJSON, linksJSON, nsidsJSON []byte) (problems, peers []string, err error) {
	var routes []route
	if err := json.Unmarshal(routesJSON, &routes); err != nil {
		return nil, nil, fmt.Errorf("parse ip route output: %w", err)
	}
	links, names, err := parseLinks(linksJSON, nsidsJSON)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range routes {
		switch {
		case r.Dst == "default" || r.Dst == "0.0.0.0/0" || r.Dst == "::/0":
			problems = append(problems, fmt.Sprintf("default route via %s%v dev %s (table %s)", r.Gateway, viaString(r.Via), r.Dev, orMain(r.Table)))
		case r.Gateway != "" || r.Via != nil:
			problems = append(problems, fmt.Sprintf("route to %s through a gateway %s%v", r.Dst, r.Gateway, viaString(r.Via)))
		}
	}
	if len(links) == 0 {
		problems = append(problems, "no interfaces listed (not even lo)")
	}
	for _, k := range links {
		if k.Name == "lo" || k.Name == bridgeName || k.Master == bridgeName {
			continue
		}
		if peer, ok := harnessPeer(k, names); ok {
			peers = append(peers, peer)
			continue
		}
		problems = append(problems, fmt.Sprintf("unexpected interface %s (%s)", k.Name, k.LinkType))
	}
	return problems, peers, nil
}

func viaString(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func orMain(t string) string {
	if t == "" {
		return "main"
	}
	return t
}

// run runs a command and returns its stdout; the error carries stderr.
func run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	// Its own process group: a Ctrl-C in the terminal interrupts Up (which then tears down), but
	// must not kill the ip, ctr or nsenter that the teardown itself runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// netnsInode identifies the namespace, to find processes inside it.
func netnsInode(path string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

var errNotRoot = errors.New("the local cluster needs root (network namespaces, mounts, cgroups): run as root")

func requireRoot() error {
	if os.Geteuid() != 0 {
		return errNotRoot
	}
	return nil
}

// requireTools fails early, with the fix, when a binary the cluster needs is missing.
func requireTools(l layout) error {
	var missing []string
	for _, t := range []string{"ip", "nsenter", "containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables"} {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if !exists("/usr/lib/cni/bridge") || !exists("/usr/lib/cni/host-local") || !exists("/usr/lib/cni/loopback") {
		missing = append(missing, "/usr/lib/cni/{bridge,host-local,loopback}")
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s: run hack/install-deps.sh", strings.Join(missing, ", "))
	}
	for _, d := range daemons {
		if d.binary == "" {
			continue
		}
		if _, err := os.Stat(l.bin(d.binary)); err != nil {
			return fmt.Errorf("missing %s: run hack/toolchain.sh kube etcd", filepath.Join(l.BinDir, d.binary))
		}
	}
	return nil
}
