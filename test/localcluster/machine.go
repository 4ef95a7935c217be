package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/capx-io/capx/test/images"
)

// Machine is a VM of the platform to play: what the platform boots it with.
type Machine struct {
	ID       int
	Hostname string
	// IP is its address on its cloudspace network, one of PlatformOptions.Private.
	IP string
	// UserData is its cloud-init user data, a prepared node's bootstrap data (nodebootstrap.go).
	UserData string
}

// MachineState is where a machine is.
type MachineState string

// Machine states.
const (
	MachineBooting   MachineState = "booting"
	MachineRunning   MachineState = "running"
	MachineStopped   MachineState = "stopped"
	MachineDestroyed MachineState = "destroyed"
	MachineFailed    MachineState = "failed"
)

// MachineStatus is what a test sees of a machine.
type MachineStatus struct {
	ID    int
	State MachineState
	// Err is why the last boot or power-off failed.
	Err      error
	Hostname string
	Role     string
	NetNS    string
	Dir      string
}

// machine plays one VM: a goroutine moves it to the state the platform last asked for,
// cancelling a boot that is overtaken (a VM deleted while it boots).
type machine struct {
	p  *Platform
	id int
	l  layout

	mu     sync.Mutex
	want   MachineState
	spec   Machine
	state  MachineState
	err    error
	role   string
	cancel context.CancelFunc
	wake   chan struct{}
	done   chan struct{}
}

// Boot starts (or restarts) a machine in the background; the platform calls it when a VM
// starts running. It returns at once.
func (p *Platform) Boot(m Machine) { p.machineFor(m.ID).ask(MachineRunning, &m) }

// Stop powers a machine off in the background, keeping its disk (its folder).
func (p *Platform) Stop(id int) { p.machineFor(id).ask(MachineStopped, nil) }

// Destroy powers a machine off in the background and removes its disk.
func (p *Platform) Destroy(id int) { p.machineFor(id).ask(MachineDestroyed, nil) }

// MachineStatus reports a machine the platform was asked about.
func (p *Platform) MachineStatus(id int) (MachineStatus, bool) {
	p.mu.Lock()
	m := p.machines[id]
	p.mu.Unlock()
	if m == nil {
		return MachineStatus{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return MachineStatus{ID: id, State: m.state, Err: m.err, Hostname: m.spec.Hostname, Role: m.role, NetNS: m.l.NetNS, Dir: m.l.Dir}, true
}

// Machines lists the machines the platform was asked about, by id.
func (p *Platform) Machines() []MachineStatus {
	p.mu.Lock()
	ids := make([]int, 0, len(p.machines))
	for id := range p.machines {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	out := make([]MachineStatus, 0, len(ids))
	for _, id := range ids {
		if s, ok := p.MachineStatus(id); ok {
			out = append(out, s)
		}
	}
	return out
}

// StopKubelet stops a running machine's kubelet, the way a hung or crashed kubelet stops
// reporting: the Node goes NotReady while the machine runs on.
func (p *Platform) StopKubelet(id int) error {
	m, err := p.running(id)
	if err != nil {
		return err
	}
	return stopDaemon(m.l, Kubelet)
}

// StartKubelet starts a stopped kubelet again.
func (p *Platform) StartKubelet(id int) error {
	m, err := p.running(id)
	if err != nil {
		return err
	}
	if daemonPID(m.l, Kubelet) != 0 {
		return nil
	}
	c := &Cluster{l: m.l, progress: p.progress}
	return c.start(kubeletDaemon(), "")
}

func (p *Platform) running(id int) (*machine, error) {
	p.mu.Lock()
	m := p.machines[id]
	p.mu.Unlock()
	if m == nil {
		return nil, fmt.Errorf("platform %s has no machine %d", p.l.Name, id)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != MachineRunning {
		return nil, fmt.Errorf("machine %d is %s, not running", id, m.state)
	}
	return m, nil
}

func (p *Platform) machineFor(id int) *machine {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m := p.machines[id]; m != nil {
		return m
	}
	m := &machine{p: p, id: id, l: p.machineLayout(id), state: MachineStopped, want: MachineStopped,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	p.machines[id] = m
	go m.run()
	return m
}

// machineLayout is where a machine lives; its node name and addresses come with its boot.
func (p *Platform) machineLayout(id int) layout {
	name := fmt.Sprintf("%s-vm%d", p.l.Name, id)
	return layout{Name: name, Dir: filepath.Join(p.l.Dir, fmt.Sprintf("vm%d", id)), BinDir: p.l.BinDir,
		NetNS: netnsPrefix + name, NodeName: name}
}

func (m *machine) ask(want MachineState, spec *Machine) {
	m.mu.Lock()
	if m.want == MachineDestroyed && want != MachineDestroyed {
		m.mu.Unlock()
		return // a destroyed VM does not come back
	}
	m.want = want
	if spec != nil {
		m.spec = *spec
	}
	if m.cancel != nil {
		m.cancel()
	}
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// quit ends the worker without touching the machine (the platform's teardown removes it).
func (m *machine) quit() {
	m.ask(MachineDestroyed, nil)
	<-m.done
}

func (m *machine) run() {
	defer close(m.done)
	for {
		m.mu.Lock()
		want, spec, state := m.want, m.spec, m.state
		ctx, cancel := context.WithCancel(context.Background())
		m.cancel = cancel
		m.mu.Unlock()
		if want == state || (want == MachineStopped && state == MachineFailed) {
			cancel()
			if want == MachineDestroyed {
				return
			}
			<-m.wake
			continue
		}
		var err error
		next := want
		switch want {
		case MachineRunning:
			m.set(MachineBooting, nil)
			if err = m.boot(ctx, spec); err != nil {
				next = MachineFailed
				m.p.logf("machine %d (%s) failed to boot: %v", m.id, spec.Hostname, err)
				// What booted is powered off: a half-booted machine runs nothing.
				if derr := m.down(context.Background(), false); derr != nil {
					err = errors.Join(err, derr)
				}
			}
		case MachineStopped, MachineDestroyed:
			if err = m.down(context.Background(), want == MachineDestroyed); err != nil {
				m.p.logf("machine %d: powering off: %v", m.id, err)
			}
		}
		cancel()
		m.set(next, err)
		if want == MachineRunning && err == nil {
			m.p.logf("machine %d (%s, %s) running", m.id, spec.Hostname, m.role)
		}
		if err != nil && want == MachineRunning {
			// Wait for the next request rather than boot again at once.
			m.mu.Lock()
			if m.want == MachineRunning {
				m.want = MachineFailed
			}
			m.mu.Unlock()
		}
	}
}

func (m *machine) set(s MachineState, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state, m.err = s, err
}

// boot powers the machine on: its namespace on its cloudspace's bridge, then the node its
// bootstrap data asks for (bootNode).
func (m *machine) boot(ctx context.Context, spec Machine) error {
	nb, err := ParseUserData(spec.UserData)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(spec.IP)
	if err != nil || !ip.Is4() {
		return fmt.Errorf("private address %q is not IPv4", spec.IP)
	}
	net, ok := m.p.network(ip)
	if !ok {
		return fmt.Errorf("private address %s is on none of the platform's cloudspace networks (%s)", ip, strings.Join(m.p.Routes()[len(m.p.l.Public):], ", "))
	}
	podSubnet, err := nodePodSubnet(nb.PodCIDR, ip)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.role = nb.Role
	m.mu.Unlock()
	l := m.p.machineLayout(m.id)
	l.NodeName = strings.ToLower(spec.Hostname)
	l.NodeIP = ip.String()
	l.PodCIDR = podSubnet
	l.ServiceCIDR = nb.ServiceCIDR
	if l.APIServiceIP, err = firstService(nb.ServiceCIDR); err != nil {
		return err
	}
	m.l = l
	if err := clearRuntime(l.Dir); err != nil {
		return err
	}
	for _, d := range []string{l.logDir(), l.runDir(), l.path("tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := saveMachineLayout(l); err != nil {
		return err
	}
	if err := writeNodePKI(l, nb, l.APIServiceIP); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	if err := writeNodeConfigs(l, nb); err != nil {
		return err
	}
	if err := createCgroups(l); err != nil {
		return err
	}
	if err := m.plug(ctx, net); err != nil {
		return err
	}
	return m.bootNode(ctx, nb)
}

// plug creates the machine's namespace with one interface, eth0, on its cloudspace's bridge,
// and routes its pods through it.
func (m *machine) plug(ctx context.Context, n privateNet) error {
	l, router := m.l, m.p.l.NetNS
	if exists(l.netnsPath()) {
		return fmt.Errorf("network namespace %s already exists: the machine was not powered off", l.NetNS)
	}
	bits := strings.SplitN(n.CIDR, "/", 2)[1]
	port := ifName(fmt.Sprintf("vm%d", m.id))
	steps := [][]string{
		{"netns", "add", l.NetNS},
		{"-n", l.NetNS, "link", "set", "lo", "up"},
		{"link", "add", "eth0", "netns", l.NetNS, "type", "veth", "peer", "name", port, "netns", router},
		{"-n", router, "link", "set", port, "master", n.Bridge, "up"},
		{"-n", l.NetNS, "addr", "add", l.NodeIP + "/" + bits, "dev", "eth0"},
		{"-n", l.NetNS, "link", "set", "eth0", "up"},
		{"-n", l.NetNS, "route", "add", "default", "via", n.Gateway, "dev", "eth0"},
		{"-n", router, "route", "replace", l.PodCIDR, "via", l.NodeIP},
	}
	for _, s := range steps {
		if _, err := run(ctx, "ip", s...); err != nil {
			return fmt.Errorf("machine %d's network: %w", m.id, err)
		}
	}
	return m.p.checkClosed(ctx)
}

// down powers the machine off: every process, container, mount, its namespace and cgroups,
// and its pods' route on the router. A stopped machine keeps its disk (certificates, etcd's
// data); a destroyed one keeps only its logs.
func (m *machine) down(ctx context.Context, destroy bool) error {
	l := m.l
	c := &Cluster{l: l, progress: m.p.progress}
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range []string{KubeProxy, Kubelet, KubeControllerManager, KubeScheduler} {
		keep(stopDaemon(l, d))
	}
	if daemonPID(l, Containerd) != 0 {
		keep(c.removeTasks(ctx))
	}
	for _, d := range []string{Containerd, KubeAPIServer, Etcd} {
		keep(stopDaemon(l, d))
	}
	for _, pid := range clusterProcesses(l) {
		keep(stopPID(pid, stopGrace))
	}
	keep(unmountAll(l.Dir))
	if l.PodCIDR != "" {
		if _, err := run(ctx, "ip", "-n", m.p.l.NetNS, "route", "del", l.PodCIDR); err != nil && exists(m.p.l.netnsPath()) && !strings.Contains(err.Error(), "No such process") {
			keep(err)
		}
	}
	keep(deleteNetNS(ctx, l))
	keep(removeCgroups(l))
	if cached, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", "capx-"+l.Name+"-*")); len(cached) > 0 {
		for _, f := range cached {
			keep(os.Remove(f))
		}
	}
	if destroy {
		keep(removeState(l.Dir))
	} else {
		keep(clearRuntime(l.Dir))
	}
	if left := leftovers(l); len(left) > 0 {
		errs = append(errs, fmt.Errorf("machine %d left behind: %s", m.id, strings.Join(left, "; ")))
	}
	return errors.Join(errs...)
}

// clearRuntime empties a machine's folder but for what a VM's disk keeps across a reboot:
// the certificates (the kubelet's signed one among them), etcd's data and the logs.
func clearRuntime(dir string) error {
	if len(mountsUnder(dir)) > 0 {
		return fmt.Errorf("not clearing %s: mounts remain below it", dir)
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		switch e.Name() {
		case "logs", "pki", "etcd", machineStateFile:
			continue
		}
		errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	return errors.Join(errs...)
}

const machineStateFile = "machine.json"

func saveMachineLayout(l layout) error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(l.path(machineStateFile), append(b, '\n'), 0o644)
}

// machineLayouts reads the layouts of the machines under a platform's folder.
func machineLayouts(dir string) []layout {
	entries, _ := os.ReadDir(dir)
	var out []layout
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "vm") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), machineStateFile))
		if err != nil {
			continue
		}
		var l layout
		if json.Unmarshal(b, &l) == nil && l.Dir != "" {
			out = append(out, l)
		}
	}
	return out
}

// nodePodSubnet is the /24 of podCIDR numbered after the last octet of the machine's address.
func nodePodSubnet(podCIDR string, ip netip.Addr) (string, error) {
	p, err := netip.ParsePrefix(podCIDR)
	if err != nil || p.Bits() > 16 {
		return "", fmt.Errorf("podCIDR %q: want /16 or wider", podCIDR)
	}
	a := p.Masked().Addr().As4()
	a[2], a[3] = ip.As4()[3], 0
	return netip.PrefixFrom(netip.AddrFrom4(a), 24).String(), nil
}

// waitFile waits until path exists (a kubelet writing its kubeconfig once its CSR is signed).
func (c *Cluster) waitFile(ctx context.Context, path string, timeout time.Duration, deps []string) error {
	return c.waitFor(ctx, filepath.Base(path), timeout, deps, func() error {
		if exists(path) {
			return nil
		}
		return errors.New("not written yet")
	})
}

// importImages imports the pause image and the platform's images into a machine's containerd.
func (m *machine) importImages(ctx context.Context) error {
	for _, t := range append([]string{m.p.pause}, m.p.o.Images...) {
		if err := images.Import(ctx, m.l.containerdSock(), t); err != nil {
			return fmt.Errorf("machine %d: %w", m.id, err)
		}
	}
	return nil
}
