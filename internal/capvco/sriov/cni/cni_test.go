package cni_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/internal/vco/vcotest"
)

// publicNet is the seed's public network of SeedLocation (203.0.113.0/24); providerNet is the
// other one, which these tests leave out of the agent's allow-list.
const (
	publicNet   = 1
	providerNet = 2
)

// node is a simulated worker: its own network namespace, which the simulator's NIC hook puts
// attached NICs into (as dummy interfaces with the NIC's MAC), a VM in the simulator, the
// agent process with a cloudspace-scoped credential, and a CNI plugin directory whose
// capvco-sriov runs the real plugin binary inside the node's namespace. Attached NICs show
// in the node's namespace through the simulator's NIC hook (hotplugNICs).
type node struct {
	sim        *vcosim.Server
	cloudspace string
	vmID       int
	netns      string
	plugins    string
	socket     string
	cni        *libcni.CNIConfig
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (network namespaces and interfaces); CI and the dev machines run as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("this test needs ip (iproute2): run hack/install-deps.sh")
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func newNetns(t *testing.T, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e9)
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	return name
}

// hotplugNICs is the simulator's NIC hook, the hardware of the test: an attached NIC appears
// on the node as one end of a veth pair with the NIC's MAC (the kernel here has no dummy
// driver); the other end, with a MAC of its own, stands for the hypervisor's side.
type hotplugNICs struct{ netns string }

func (d hotplugNICs) Attached(vmID int, mac string) error {
	suffix := strings.ReplaceAll(mac, ":", "")[6:]
	out, err := exec.Command("ip", "-n", d.netns, "link", "add", "hp"+suffix, "address", mac, "type", "veth", "peer", "name", "hv"+suffix).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

func (d hotplugNICs) Detached(vmID int, mac string) error {
	h, closeNS, err := handleIn(d.netns)
	if err != nil {
		return err
	}
	defer closeNS()
	link := linkByMAC(h, mac)
	if link == nil {
		return fmt.Errorf("the NIC %s is not on the node (still in a Pod?)", mac)
	}
	return h.LinkDel(link)
}

func handleIn(name string) (*netlink.Handle, func(), error) {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return nil, nil, err
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return nil, nil, err
	}
	return h, func() { h.Close(); ns.Close() }, nil
}

func linkByMAC(h *netlink.Handle, mac string) netlink.Link {
	links, _ := h.LinkList()
	for _, l := range links {
		if l.Attrs().HardwareAddr.String() == mac {
			return l
		}
	}
	return nil
}

func (n *node) linkIn(t *testing.T, ns, mac string) (netlink.Link, []netlink.Addr) {
	t.Helper()
	h, closeNS, err := handleIn(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer closeNS()
	l := linkByMAC(h, mac)
	if l == nil {
		return nil, nil
	}
	addrs, err := h.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	return l, addrs
}

func (n *node) nics(t *testing.T) []vco.ExternalNIC {
	t.Helper()
	c := vcotest.Client(t, n.sim, vcosim.SeedOperatorPrinc)
	nics, err := c.ListExternalNICs(context.Background(), n.cloudspace, n.vmID)
	if err != nil {
		t.Fatal(err)
	}
	return nics
}

var built string

// binaries builds the plugin and the agent once per test process.
func binaries(t *testing.T) string {
	t.Helper()
	if built != "" {
		return built
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "capx-sriov-bin-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/capvco-sriov", "./cmd/capvco-sriov-agent")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the SR-IOV binaries: %v\n%s", err, out)
	}
	built = dir
	return dir
}

func newNode(t *testing.T, hook bool) *node {
	t.Helper()
	requireRoot(t)
	bin := binaries(t)
	ctx := context.Background()
	n := &node{sim: vcosim.NewTestServer(t, vcosim.Options{})}
	op := vcotest.Client(t, n.sim, vcosim.SeedOperatorPrinc)
	var err error
	if n.cloudspace, err = op.CreateCloudspace(ctx, vco.CreateCloudspaceRequest{Name: "capvco_team-a_prod_primary", Location: vcosim.SeedLocation}); err != nil {
		t.Fatal(err)
	}
	images, err := op.ListImages(ctx, vcosim.SeedLocation)
	if err != nil || len(images) == 0 {
		t.Fatalf("images: %v %v", images, err)
	}
	if n.vmID, err = op.CreateVM(ctx, n.cloudspace, vco.CreateVMRequest{Name: "prod-md-0-x1", VCPUs: 2, MemoryMiB: 2048, ImageID: images[0].ID}); err != nil {
		t.Fatal(err)
	}
	// The SR-IOV credential: a service account granted this cloudspace only.
	secret, err := n.sim.AddPrincipal(vcosim.Principal{Name: "sriov", Customer: vcosim.SeedCustomer, ClientID: "sriov",
		Grants: []vcosim.Grant{{ResourceType: "cloudspace", ResourceID: n.cloudspace}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	if err := os.Mkdir(creds, 0o700); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{vco.SecretKeyURL: n.sim.APIURL(), vco.SecretKeyCustomer: vcosim.SeedCustomer,
		vco.SecretKeyClientID: "sriov", vco.SecretKeyClientSecret: secret, vco.SecretKeyIAMURL: n.sim.IAMURL()} {
		if err := os.WriteFile(filepath.Join(creds, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n.netns = newNetns(t, "capx-sriov-node")
	if hook {
		n.sim.SetNICDevices(hotplugNICs{netns: n.netns})
	}
	n.socket = filepath.Join(dir, "agent.sock")
	agentLog := &strings.Builder{}
	agent := exec.Command(filepath.Join(bin, "capvco-sriov-agent"), "--credentials-dir", creds,
		"--provider-id", names.ProviderID(vcosim.SeedLocation, n.vmID), "--cloudspace-id", "not-this-one,"+n.cloudspace,
		"--external-network-id", fmt.Sprint(publicNet), "--socket", n.socket, "--state-dir", filepath.Join(dir, "state"))
	agent.Stdout, agent.Stderr = agentLog, agentLog
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = agent.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = agent.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("agent log:\n%s", agentLog)
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(n.socket); err == nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("the agent exited:\n%s", agentLog)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not open its socket:\n%s", agentLog)
		}
	}
	// The runtime finds the plugin by its type in the plugin directory; this one runs the real
	// binary inside the node's network namespace, where the node's NICs appear.
	n.plugins = filepath.Join(dir, "plugins")
	if err := os.Mkdir(n.plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\nexec ip netns exec %s %s \"$@\"\n", n.netns, filepath.Join(bin, "capvco-sriov"))
	if err := os.WriteFile(filepath.Join(n.plugins, "capvco-sriov"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	n.cni = libcni.NewCNIConfigWithCacheDir([]string{n.plugins}, filepath.Join(dir, "cni-cache"), nil)
	return n
}

func (n *node) conf(t *testing.T, networkID int, extra string) *libcni.PluginConfig {
	t.Helper()
	raw := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"sriov-public","type":"capvco-sriov","networkID":%d,"prefixLength":24,"agentSocket":%q%s}`,
		networkID, n.socket, extra)
	pc, err := libcni.NetworkPluginConfFromBytes([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

// TestPodGetsAndLosesNIC drives the plugin through libcni, the CNI library container runtimes
// use: ADD attaches a NIC to the node's VM, the interface with the MAC the API reports moves
// into the Pod's namespace as net1 with the NIC's address; DEL moves it out and the NIC is
// detached in the simulator; a second DEL is a no-op.
func TestPodGetsAndLosesNIC(t *testing.T) {
	n := newNode(t, true)
	ctx := context.Background()
	pod := newNetns(t, "capx-sriov-pod")
	rt := &libcni.RuntimeConf{ContainerID: "pod-web-1", NetNS: "/var/run/netns/" + pod, IfName: "net1"}
	pc := n.conf(t, publicNet, "")

	r, err := n.cni.AddNetwork(ctx, pc, rt)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	res, err := current.NewResultFromResult(r)
	if err != nil {
		t.Fatal(err)
	}
	nics := n.nics(t)
	if len(nics) != 1 || nics[0].NetworkID != publicNet {
		t.Fatalf("the VM's external NICs after ADD = %+v, want one on network %d", nics, publicNet)
	}
	mac, ip := nics[0].MAC, nics[0].IP
	if len(res.Interfaces) != 1 || res.Interfaces[0].Mac != mac || res.Interfaces[0].Name != "net1" || res.Interfaces[0].Sandbox != rt.NetNS {
		t.Errorf("result interfaces = %+v, want net1 with MAC %s in %s", res.Interfaces, mac, rt.NetNS)
	}
	if len(res.IPs) != 1 || res.IPs[0].Address.String() != ip+"/24" {
		t.Errorf("result IPs = %+v, want %s/24", res.IPs, ip)
	}
	link, addrs := n.linkIn(t, pod, mac)
	if link == nil || link.Attrs().Name != "net1" || link.Attrs().Flags&net.FlagUp == 0 {
		t.Fatalf("the Pod's namespace has no net1 up with MAC %s: %+v", mac, link)
	}
	if len(addrs) != 1 || addrs[0].IPNet.String() != ip+"/24" {
		t.Errorf("net1 addresses = %v, want %s/24", addrs, ip)
	}
	if l, _ := n.linkIn(t, n.netns, mac); l != nil {
		t.Errorf("the interface is still on the node as %s", l.Attrs().Name)
	}
	if err := n.cni.CheckNetwork(ctx, pc, rt); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	if _, err := n.cni.AddNetwork(ctx, pc, rt); err != nil {
		t.Errorf("a repeated ADD: %v", err)
	}
	if nics := n.nics(t); len(nics) != 1 || nics[0].MAC != mac {
		t.Errorf("after a repeated ADD the VM's NICs = %+v, want the one with %s", nics, mac)
	}
	if l, _ := n.linkIn(t, pod, mac); l == nil || l.Attrs().Name != "net1" {
		t.Errorf("after a repeated ADD the Pod's net1 is %+v", l)
	}

	if err := n.cni.DelNetwork(ctx, pc, rt); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if l, _ := n.linkIn(t, pod, mac); l != nil {
		t.Errorf("the Pod still has %s with MAC %s after DEL", l.Attrs().Name, mac)
	}
	if nics := n.nics(t); len(nics) != 0 {
		t.Errorf("the VM's external NICs after DEL = %+v, want none", nics)
	}
	if l, _ := n.linkIn(t, n.netns, mac); l != nil {
		t.Errorf("the detached NIC's interface %s is still on the node", l.Attrs().Name)
	}
	if err := n.cni.DelNetwork(ctx, pc, rt); err != nil {
		t.Errorf("a second DEL: %v", err)
	}
}

// TestAddThatCannotFinishLeavesNoNIC: when the interface never shows up on the node (no VF
// driver in the image), ADD fails naming that, and the NIC it had attached is detached again.
func TestAddThatCannotFinishLeavesNoNIC(t *testing.T) {
	n := newNode(t, false)
	pod := newNetns(t, "capx-sriov-pod")
	rt := &libcni.RuntimeConf{ContainerID: "pod-web-2", NetNS: "/var/run/netns/" + pod, IfName: "net1"}
	_, err := n.cni.AddNetwork(context.Background(), n.conf(t, publicNet, `,"linkTimeoutSeconds":1`), rt)
	if err == nil || !strings.Contains(err.Error(), "appeared on the node") {
		t.Fatalf("ADD = %v, want a failure saying the interface did not appear", err)
	}
	if nics := n.nics(t); len(nics) != 0 {
		t.Errorf("a failed ADD left NICs attached: %+v", nics)
	}
}

// TestNetworkOutsideAllowList: the agent attaches only on the networks it was given.
func TestNetworkOutsideAllowList(t *testing.T) {
	n := newNode(t, true)
	pod := newNetns(t, "capx-sriov-pod")
	rt := &libcni.RuntimeConf{ContainerID: "pod-web-3", NetNS: "/var/run/netns/" + pod, IfName: "net1"}
	_, err := n.cni.AddNetwork(context.Background(), n.conf(t, providerNet, ""), rt)
	if err == nil || !strings.Contains(err.Error(), "not one this agent attaches") {
		t.Fatalf("ADD on network %d = %v, want a refusal", providerNet, err)
	}
	if nics := n.nics(t); len(nics) != 0 {
		t.Errorf("NICs = %+v", nics)
	}
}
