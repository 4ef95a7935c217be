package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/capx-io/capx/test/images"
)

// A platform network is the network of a simulated cloud, made real on this machine: one
// namespace, capx-<name>, is the platform's router. It owns the platform's public prefixes
// (every address in them is local to it: the load balancers' front ends, the platform's own
// API), bridges its cloudspace networks (each bridge holds the network's first address, the
// machines' gateway), and routes each machine's pods through the machine. Each machine is a
// namespace of its own with one veth on its cloudspace's bridge and a default route to the
// router, running a real node (machine.go). A management cluster is attached with one veth
// pair (Attach): its pods route the platform's prefixes to their node, the node routes them
// over that veth, and the router routes the cluster's pod range back. The router's TCP load
// balancers are carried by this process (serveLoadBalancers), which accepts on each front end
// inside the router and dials a pool member from there.
//
// Nothing of it touches the host's namespace: every interface of every namespace involved
// leads to another namespace of the harness (closure.go), so the management cluster's
// guarantee that no packet leaves the machine holds for the machines too.

// PlatformOptions say which platform network to run.
type PlatformOptions struct {
	// Name names the router's namespace (capx-<name>) and the folder. Default "vco".
	Name string
	// Dir is the platform's folder. Default: $CAPX_CLUSTERS_DIR/<name>, else
	// <repository>/_artifacts/clusters/<name>. Each machine has a folder vm<id> inside it.
	Dir string
	// BinDir holds etcd and the Kubernetes binaries. Default <repository>/bin.
	BinDir string
	// Public are the prefixes the platform owns outside its cloudspaces: its external networks
	// and its services (say, the API). Every address in them is the router's.
	Public []string
	// Private are the cloudspace networks machines may be on.
	Private []string
	// Images are tarballs (test/images) every machine's containerd imports when it boots, besides
	// the pause image.
	Images []string
	// LoadBalancers are the platform's TCP load balancers, whose traffic the router carries.
	// Nil carries none.
	LoadBalancers LoadBalancers
	// Progress receives one line per step. Default os.Stderr.
	Progress io.Writer
}

// LoadBalancers is what the router needs of the platform's load balancers.
type LoadBalancers interface {
	// Fronts lists the addresses and ports TCP load balancers listen on.
	Fronts() []netip.AddrPort
	// Backends lists the host:port addresses the load balancer at front forwards to.
	Backends(front netip.AddrPort) []string
}

// platformLayout is saved as platform.json, so that Down in another process finds it all.
type platformLayout struct {
	Name    string       `json:"name"`
	Dir     string       `json:"dir"`
	BinDir  string       `json:"binDir"`
	NetNS   string       `json:"netns"`
	Public  []string     `json:"public"`
	Private []privateNet `json:"private"`
	// Attached are the management clusters' namespaces.
	Attached []string `json:"attached,omitempty"`
}

// privateNet is a cloudspace network on the router: its bridge and the gateway address.
type privateNet struct {
	CIDR    string `json:"cidr"`
	Bridge  string `json:"bridge"`
	Gateway string `json:"gateway"`
}

const platformStateFile = "platform.json"

func (l platformLayout) netnsPath() string { return filepath.Join(netnsDir, l.NetNS) }

// Platform is a platform network that is up.
type Platform struct {
	l        platformLayout
	o        PlatformOptions
	root     string
	pause    string
	progress io.Writer

	mu       sync.Mutex
	machines map[int]*machine
	fronts   map[netip.AddrPort]net.Listener
	next     map[netip.AddrPort]int
	stop     chan struct{}
	stopped  chan struct{}
}

// Name is the platform's name.
func (p *Platform) Name() string { return p.l.Name }

// Dir is the platform's folder.
func (p *Platform) Dir() string { return p.l.Dir }

// NetNS is the router's namespace.
func (p *Platform) NetNS() string { return p.l.NetNS }

// Routes are every prefix the platform routes: what an attached cluster's pods must route to
// their node (Options.PodRoutes).
func (p *Platform) Routes() []string {
	out := slices.Clone(p.l.Public)
	for _, n := range p.l.Private {
		out = append(out, n.CIDR)
	}
	return out
}

func (p *Platform) logf(format string, args ...any) {
	fmt.Fprintf(p.progress, "[platform %s] %s\n", p.l.Name, fmt.Sprintf(format, args...))
}

func resolvePlatform(o PlatformOptions) (platformLayout, string, error) {
	if o.Name == "" {
		o.Name = "vco"
	}
	r, err := resolve(Options{Name: o.Name, Dir: o.Dir, BinDir: o.BinDir})
	if err != nil {
		return platformLayout{}, "", fmt.Errorf("platform: %w", err)
	}
	l := platformLayout{Name: r.Name, Dir: r.Dir, BinDir: r.BinDir, NetNS: netnsPrefix + r.Name}
	var all []netip.Prefix
	parse := func(s string) (netip.Prefix, error) {
		p, err := netip.ParsePrefix(s)
		if err != nil || !p.Addr().Is4() || p.Bits() < 8 || p.Bits() > 30 {
			return p, fmt.Errorf("platform prefix %q: want an IPv4 prefix from /8 to /30", s)
		}
		p = p.Masked()
		for _, q := range all {
			if p.Overlaps(q) {
				return p, fmt.Errorf("platform prefixes %s and %s overlap", p, q)
			}
		}
		all = append(all, p)
		return p, nil
	}
	for _, s := range o.Public {
		p, err := parse(s)
		if err != nil {
			return l, "", err
		}
		l.Public = append(l.Public, p.String())
	}
	for i, s := range o.Private {
		p, err := parse(s)
		if err != nil {
			return l, "", err
		}
		l.Private = append(l.Private, privateNet{CIDR: p.String(), Bridge: fmt.Sprintf("cs%d", i), Gateway: p.Addr().Next().String()})
	}
	return l, r.root, nil
}

// UpPlatform creates the platform's router and starts carrying its load balancers' traffic.
// A platform left behind by an earlier run is refused: DownPlatform (hack/cluster down --name
// <name>) removes it.
func UpPlatform(ctx context.Context, o PlatformOptions) (*Platform, error) {
	if err := requireRoot(); err != nil {
		return nil, err
	}
	l, root, err := resolvePlatform(o)
	if err != nil {
		return nil, err
	}
	if o.Progress == nil {
		o.Progress = os.Stderr
	}
	unlock, err := lockClusters(filepath.Dir(l.Dir), o.Progress)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if left := platformLeftovers(l); len(left) > 0 {
		return nil, fmt.Errorf("platform %s was not torn down (%s): run hack/cluster down --name %s first", l.Name, strings.Join(left, "; "), l.Name)
	}
	if exists(filepath.Join(l.Dir, stateFileName)) {
		return nil, fmt.Errorf("%s is a local cluster's folder: give the platform another name", l.Dir)
	}
	if err := os.RemoveAll(l.Dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(l.Dir, "images"), 0o755); err != nil {
		return nil, err
	}
	p := &Platform{l: l, o: o, root: root, progress: o.Progress, machines: map[int]*machine{},
		fronts: map[netip.AddrPort]net.Listener{}, next: map[netip.AddrPort]int{}}
	if err := p.saveLayout(); err != nil {
		return nil, err
	}
	if err := p.createRouter(ctx); err != nil {
		_ = p.teardown(context.WithoutCancel(ctx))
		return nil, err
	}
	if p.pause, err = images.Pause(ctx, root, filepath.Join(l.Dir, "images")); err != nil {
		_ = p.teardown(context.WithoutCancel(ctx))
		return nil, err
	}
	p.stop, p.stopped = make(chan struct{}), make(chan struct{})
	go p.serveLoadBalancers()
	p.logf("router %s: public %s, cloudspace networks %s", l.NetNS, strings.Join(l.Public, ", "), strings.Join(p.Routes()[len(l.Public):], ", "))
	return p, nil
}

func (p *Platform) saveLayout() error {
	b, err := json.MarshalIndent(p.l, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(p.l.Dir, platformStateFile), append(b, '\n'), 0o644)
}

// createRouter makes the router's namespace: forwarding on, the public prefixes local, a bridge
// per cloudspace network holding its gateway address.
func (p *Platform) createRouter(ctx context.Context) error {
	ns := p.l.NetNS
	steps := [][]string{{"ip", "netns", "add", ns}, {"ip", "-n", ns, "link", "set", "lo", "up"},
		{"nsenter", "--net=" + p.l.netnsPath(), "--", "sysctl", "-qw", "net.ipv4.ip_forward=1"}}
	for _, pub := range p.l.Public {
		steps = append(steps, []string{"ip", "-n", ns, "route", "add", "local", pub, "dev", "lo"})
	}
	for _, n := range p.l.Private {
		bits := strings.SplitN(n.CIDR, "/", 2)[1]
		steps = append(steps,
			[]string{"ip", "-n", ns, "link", "add", n.Bridge, "type", "bridge"},
			[]string{"ip", "-n", ns, "addr", "add", n.Gateway + "/" + bits, "dev", n.Bridge},
			[]string{"ip", "-n", ns, "link", "set", n.Bridge, "up"})
	}
	for _, s := range steps {
		if _, err := run(ctx, s[0], s[1:]...); err != nil {
			return fmt.Errorf("platform router: %w", err)
		}
	}
	return p.checkClosed(ctx)
}

// checkClosed refuses a router from which an interface leads off the machine (closure.go).
func (p *Platform) checkClosed(ctx context.Context) error {
	problems, err := closureProblems(ctx, []string{"", p.l.NetNS})
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("platform %s is not isolated: %s", p.l.Name, strings.Join(problems, "; "))
	}
	return nil
}

// network finds the cloudspace network an address is on.
func (p *Platform) network(ip netip.Addr) (privateNet, bool) {
	for _, n := range p.l.Private {
		if pre, _ := netip.ParsePrefix(n.CIDR); pre.Contains(ip) {
			return n, true
		}
	}
	return privateNet{}, false
}

// Attach connects a management cluster to the platform: its pods then reach the platform's
// load balancers, machines and services, and the machines answer them. The cluster must have
// been brought up with Options.PodRoutes covering Routes(). Attaching again replaces the link.
// The cluster's isolation check then covers the platform too.
func (p *Platform) Attach(ctx context.Context, c *Cluster) error {
	var missing []string
	for _, r := range p.Routes() {
		if !slices.Contains(c.l.PodRoutes, r) {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cluster %s does not route %s to its node: bring it up with Options.PodRoutes = Platform.Routes() (%s)", c.l.Name, strings.Join(missing, ", "), strings.Join(p.Routes(), ", "))
	}
	clusterSide, routerSide := ifName("p-"+p.l.Name), ifName("m-"+c.l.Name)
	if _, err := run(ctx, "ip", "-n", p.l.NetNS, "link", "show", routerSide); err == nil {
		if _, err := run(ctx, "ip", "-n", p.l.NetNS, "link", "delete", routerSide); err != nil {
			return err
		}
	}
	steps := [][]string{
		{"ip", "link", "add", clusterSide, "netns", c.l.NetNS, "type", "veth", "peer", "name", routerSide, "netns", p.l.NetNS},
		{"ip", "-n", c.l.NetNS, "link", "set", clusterSide, "up"},
		{"ip", "-n", p.l.NetNS, "link", "set", routerSide, "up"},
		// Neither end has an address: each answers ARP for what it routes elsewhere.
		{"nsenter", "--net=" + c.l.netnsPath(), "--", "sysctl", "-qw", "net.ipv4.conf." + clusterSide + ".proxy_arp=1"},
		{"nsenter", "--net=" + p.l.netnsPath(), "--", "sysctl", "-qw", "net.ipv4.conf." + routerSide + ".proxy_arp=1"},
		{"ip", "-n", p.l.NetNS, "route", "replace", c.l.PodCIDR, "dev", routerSide},
	}
	for _, r := range p.Routes() {
		steps = append(steps, []string{"ip", "-n", c.l.NetNS, "route", "replace", r, "dev", clusterSide})
	}
	for _, s := range steps {
		if _, err := run(ctx, s[0], s[1:]...); err != nil {
			return fmt.Errorf("attaching cluster %s to platform %s: %w", c.l.Name, p.l.Name, err)
		}
	}
	if err := checkIsolation(ctx, c.l.NetNS); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Contains(p.l.Attached, c.l.NetNS) {
		p.l.Attached = append(p.l.Attached, c.l.NetNS)
	}
	p.logf("cluster %s attached (%s <-> %s)", c.l.Name, clusterSide, routerSide)
	return p.saveLayout()
}

// ifName keeps an interface name within the kernel's 15 characters.
func ifName(s string) string {
	if len(s) > 15 {
		return s[:15]
	}
	return s
}

// Listen opens a TCP listening socket on addr (an address of the public prefixes) inside the
// router: a platform service, such as its API, that this process serves.
func (p *Platform) Listen(addr string) (net.Listener, error) {
	ln, err := listenIn(p.l.netnsPath(), addr)
	if err != nil {
		return nil, fmt.Errorf("platform %s: %w", p.l.Name, err)
	}
	return ln, nil
}

// DialContext connects from inside the router: to a load balancer's front end, a machine, or
// an attached cluster's pod. A client of a workload cluster's API server uses it as its Dial.
func (p *Platform) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return dialIn(ctx, p.l.netnsPath(), network, addr)
}

// serveLoadBalancers keeps one listener inside the router on every load balancer front end,
// looking again every half second.
func (p *Platform) serveLoadBalancers() {
	defer close(p.stopped)
	failed := map[netip.AddrPort]bool{}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		var want []netip.AddrPort
		if p.o.LoadBalancers != nil {
			want = p.o.LoadBalancers.Fronts()
		}
		p.mu.Lock()
		for f, ln := range p.fronts {
			if !slices.Contains(want, f) {
				_ = ln.Close()
				delete(p.fronts, f)
			}
		}
		for _, f := range want {
			if p.fronts[f] != nil {
				continue
			}
			ln, err := listenIn(p.l.netnsPath(), f.String())
			if err != nil {
				if !failed[f] {
					p.logf("load balancer %s: %v", f, err)
					failed[f] = true
				}
				continue
			}
			p.fronts[f] = ln
			go p.acceptLoadBalanced(f, ln)
		}
		p.mu.Unlock()
		select {
		case <-p.stop:
			p.mu.Lock()
			for f, ln := range p.fronts {
				_ = ln.Close()
				delete(p.fronts, f)
			}
			p.mu.Unlock()
			return
		case <-tick.C:
		}
	}
}

func (p *Platform) acceptLoadBalanced(front netip.AddrPort, ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go p.forward(front, conn)
	}
}

// forward carries one connection to the next pool member, round robin. Like the platform's L4
// load balancer it has no health checks and never retries another member: a member that does
// not answer fails the connection, which is why CAPVCO and the CCM admit only members that
// answer their probes.
func (p *Platform) forward(front netip.AddrPort, client net.Conn) {
	defer client.Close()
	backends := p.o.LoadBalancers.Backends(front)
	if len(backends) == 0 {
		return
	}
	p.mu.Lock()
	target := backends[p.next[front]%len(backends)]
	p.next[front]++
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	server, err := p.DialContext(ctx, "tcp", target)
	if err != nil {
		return
	}
	defer server.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	<-done
}

// Down destroys every machine, stops carrying traffic and removes the router (and with it the
// attached clusters' veths and routes). The folder stays with the machines' logs. It returns
// an error naming anything left behind.
func (p *Platform) Down(ctx context.Context) error {
	unlock, err := lockClusters(filepath.Dir(p.l.Dir), p.progress)
	if err != nil {
		return err
	}
	defer unlock()
	if p.stop != nil {
		close(p.stop)
		<-p.stopped
		p.stop = nil
	}
	return p.teardown(ctx)
}

// teardown removes the machines and the router; it works on a platform this process did not
// start too (DownPlatform).
func (p *Platform) teardown(ctx context.Context) error {
	start := time.Now()
	var errs []error
	p.mu.Lock()
	running := make([]*machine, 0, len(p.machines))
	for _, m := range p.machines {
		running = append(running, m)
	}
	p.mu.Unlock()
	for _, m := range running {
		m.quit()
	}
	for _, l := range machineLayouts(p.l.Dir) {
		m := &machine{p: p, l: l}
		errs = append(errs, m.down(ctx, true))
	}
	errs = append(errs, deleteNetNS(ctx, layout{NetNS: p.l.NetNS}))
	if left := platformLeftovers(p.l); len(left) > 0 {
		errs = append(errs, fmt.Errorf("left behind: %s", strings.Join(left, "; ")))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("platform %s: %w", p.l.Name, err)
	}
	p.logf("down in %.1fs (machines' logs kept in %s)", time.Since(start).Seconds(), p.l.Dir)
	return nil
}

// OpenPlatform attaches to a platform by its saved layout (DownPlatform uses it).
func OpenPlatform(o PlatformOptions) (*Platform, error) {
	l, _, err := resolvePlatform(o)
	if err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(filepath.Join(l.Dir, platformStateFile)); err == nil {
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(l.Dir, platformStateFile), err)
		}
	}
	if o.Progress == nil {
		o.Progress = os.Stderr
	}
	return &Platform{l: l, o: o, progress: o.Progress, machines: map[int]*machine{}}, nil
}

// DownPlatform tears down the platform the options name, even one whose process is gone.
func DownPlatform(ctx context.Context, o PlatformOptions) error {
	if err := requireRoot(); err != nil {
		return err
	}
	p, err := OpenPlatform(o)
	if err != nil {
		return err
	}
	return p.Down(ctx)
}

// IsPlatform reports whether dir is a platform's folder.
func IsPlatform(dir string) bool { return exists(filepath.Join(dir, platformStateFile)) }

// platformLeftovers lists what of the platform still exists: its router, its machines' namespaces,
// processes, mounts and cgroups.
func platformLeftovers(l platformLayout) []string {
	var left []string
	if exists(l.netnsPath()) {
		left = append(left, "network namespace "+l.NetNS)
	}
	for _, ml := range machineLayouts(l.Dir) {
		left = append(left, leftovers(ml)...)
	}
	if entries, err := os.ReadDir(netnsDir); err == nil {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), l.NetNS+"-vm") && !slices.ContainsFunc(left, func(s string) bool { return strings.HasSuffix(s, " "+e.Name()) }) {
				left = append(left, "network namespace "+e.Name())
			}
		}
	}
	sort.Strings(left)
	return slices.Compact(left)
}
