// Package cni is the SR-IOV agent's CNI plugin, capvco-sriov: at ADD it asks the node agent
// for a NIC, waits for the interface with the MAC the platform reported to appear on the node,
// and moves it into the Pod's network namespace under the interface name the runtime asked for,
// with the address the platform gave the NIC; at DEL it moves the interface back out and has
// the agent detach the NIC. It holds no credential.
package cni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/capx-io/capx/internal/capvco/sriov"
)

// Type is the plugin's name in a CNI configuration (and its binary's name).
const Type = "capvco-sriov"

// Conf is the plugin's network configuration.
type Conf struct {
	types.NetConf
	// NetworkID is the external network whose NIC the Pod gets.
	NetworkID int `json:"networkID"`
	// Model is the NIC model ("" = the platform's default).
	Model string `json:"model,omitempty"`
	// AgentSocket is the node agent's socket (default sriov.DefaultSocket).
	AgentSocket string `json:"agentSocket,omitempty"`
	// PrefixLength is the external network's prefix length (24 for a /24): with it, the
	// interface gets the address the platform gave the NIC; without it, no address (the
	// workload configures its own). The agent's credential may be cloudspace-scoped and then
	// cannot read the location's networks, so the configuration says it.
	PrefixLength int `json:"prefixLength,omitempty"`
	// LinkTimeoutSeconds is how long the new interface may take to appear on the node after
	// the platform reported it (default 60).
	LinkTimeoutSeconds int `json:"linkTimeoutSeconds,omitempty"`
}

// ParseConf reads and checks the configuration the runtime passes on stdin.
func ParseConf(b []byte) (Conf, error) {
	var c Conf
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%s: the network configuration is not JSON: %w", Type, err)
	}
	if c.NetworkID == 0 {
		return c, fmt.Errorf("%s: networkID (the external network of the Pod's NIC) is required", Type)
	}
	if c.AgentSocket == "" {
		c.AgentSocket = sriov.DefaultSocket
	}
	if c.PrefixLength < 0 || c.PrefixLength > 128 {
		return c, fmt.Errorf("%s: prefixLength %d is not a prefix length", Type, c.PrefixLength)
	}
	if c.LinkTimeoutSeconds <= 0 {
		c.LinkTimeoutSeconds = 60
	}
	return c, nil
}

// Main runs the plugin (CNI_COMMAND and the other CNI variables, the configuration on stdin).
func Main() {
	skel.PluginMainFuncs(skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck}, version.All,
		"capvco-sriov: a whitesky.cloud NIC per Pod, attached by the CAPVCO SR-IOV agent")
}

func key(args *skel.CmdArgs) sriov.AttachmentKey {
	return sriov.AttachmentKey{ContainerID: args.ContainerID, IfName: args.IfName}
}

func cmdAdd(args *skel.CmdArgs) error {
	conf, err := ParseConf(args.StdinData)
	if err != nil {
		return err
	}
	ctx := context.Background()
	agent := sriov.Client{Socket: conf.AgentSocket}
	att, err := agent.Attach(ctx, sriov.AttachRequest{ContainerID: args.ContainerID, IfName: args.IfName, NetworkID: conf.NetworkID, Model: conf.Model})
	if err != nil {
		return err
	}
	res, err := moveIn(args, conf, att)
	if err != nil {
		// The Pod does not start; its NIC must not stay attached (and billed) without it.
		return errors.Join(err, moveOut(args, att), agent.Detach(ctx, key(args)))
	}
	return types.PrintResult(res, conf.CNIVersion)
}

// moveIn finds the NIC's interface on the node by its MAC and moves it into the Pod. An
// interface already in the Pod (a repeated ADD) stays where it is.
func moveIn(args *skel.CmdArgs, conf Conf, att *sriov.Attachment) (*current.Result, error) {
	mac, err := net.ParseMAC(att.MAC)
	if err != nil {
		return nil, fmt.Errorf("the agent's MAC %q: %w", att.MAC, err)
	}
	target, err := netns.GetFromPath(args.Netns)
	if err != nil {
		return nil, fmt.Errorf("the Pod's network namespace %s: %w", args.Netns, err)
	}
	defer target.Close()
	h, err := netlink.NewHandleAt(target)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	link, err := findLink(h, mac)
	if err != nil {
		return nil, err
	}
	if link == nil {
		if err := moveToPod(mac, target, time.Duration(conf.LinkTimeoutSeconds)*time.Second); err != nil {
			return nil, err
		}
		if link, err = findLink(h, mac); err != nil || link == nil {
			return nil, fmt.Errorf("the interface with MAC %s is not in %s after the move: %v", mac, args.Netns, err)
		}
	}
	if link.Attrs().Name != args.IfName {
		if err := h.LinkSetName(link, args.IfName); err != nil {
			return nil, fmt.Errorf("rename %s to %s: %w", link.Attrs().Name, args.IfName, err)
		}
	}
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{{Name: args.IfName, Mac: mac.String(), Sandbox: args.Netns}}}
	if ip := net.ParseIP(att.IP); ip != nil && conf.PrefixLength > 0 {
		bits := 128
		if ip.To4() != nil {
			ip, bits = ip.To4(), 32
		}
		addr := &net.IPNet{IP: ip, Mask: net.CIDRMask(conf.PrefixLength, bits)}
		if err := h.AddrReplace(link, &netlink.Addr{IPNet: addr}); err != nil {
			return nil, fmt.Errorf("address %s on %s: %w", addr, args.IfName, err)
		}
		res.IPs = []*current.IPConfig{{Address: *addr, Interface: current.Int(0)}}
	}
	if err := h.LinkSetUp(link); err != nil {
		return nil, fmt.Errorf("set %s up: %w", args.IfName, err)
	}
	return res, nil
}

// moveToPod waits for the interface with the MAC on the node and moves it into the Pod.
func moveToPod(mac net.HardwareAddr, target netns.NsHandle, timeout time.Duration) error {
	link, err := waitForLink(netlink.Handle{}, mac, timeout)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetDown(link); err != nil {
		return fmt.Errorf("set %s down: %w", link.Attrs().Name, err)
	}
	if err := netlink.LinkSetNsFd(link, int(target)); err != nil {
		return fmt.Errorf("move %s (%s) into the Pod: %w", link.Attrs().Name, mac, err)
	}
	return nil
}

func cmdDel(args *skel.CmdArgs) error {
	conf, err := ParseConf(args.StdinData)
	if err != nil {
		return err
	}
	ctx := context.Background()
	agent := sriov.Client{Socket: conf.AgentSocket}
	att, err := agent.Get(ctx, key(args))
	if err != nil || att == nil {
		return err // nothing attached: DEL is done
	}
	if err := moveOut(args, att); err != nil {
		return err
	}
	return agent.Detach(ctx, key(args))
}

// moveOut hands the interface back to the node before the NIC is detached. A namespace that
// is gone already took its interfaces' fate with it: the NIC is detached all the same.
func moveOut(args *skel.CmdArgs, att *sriov.Attachment) error {
	if args.Netns == "" {
		return nil
	}
	mac, err := net.ParseMAC(att.MAC)
	if err != nil {
		return err
	}
	pod, err := netns.GetFromPath(args.Netns)
	if err != nil {
		return nil
	}
	defer pod.Close()
	h, err := netlink.NewHandleAt(pod)
	if err != nil {
		return err
	}
	defer h.Close()
	link, err := findLink(h, mac)
	if err != nil || link == nil {
		return err
	}
	host, err := netns.Get()
	if err != nil {
		return err
	}
	defer host.Close()
	_ = h.LinkSetDown(link)
	// A name of its own on the node, where the Pod's name (net1, ...) may be taken.
	if err := h.LinkSetName(link, hostName(mac)); err != nil {
		return fmt.Errorf("rename %s: %w", link.Attrs().Name, err)
	}
	if err := h.LinkSetNsFd(link, int(host)); err != nil {
		return fmt.Errorf("move %s out of %s: %w", mac, args.Netns, err)
	}
	return nil
}

// hostName is the interface's name on the node between Pods: sv plus the MAC's last bytes.
func hostName(mac net.HardwareAddr) string {
	return "sv" + strings.ReplaceAll(mac.String()[6:], ":", "")
}

func cmdCheck(args *skel.CmdArgs) error {
	conf, err := ParseConf(args.StdinData)
	if err != nil {
		return err
	}
	att, err := sriov.Client{Socket: conf.AgentSocket}.Get(context.Background(), key(args))
	if err != nil {
		return err
	}
	if att == nil {
		return fmt.Errorf("no NIC is attached for %s/%s", args.ContainerID, args.IfName)
	}
	pod, err := netns.GetFromPath(args.Netns)
	if err != nil {
		return err
	}
	defer pod.Close()
	h, err := netlink.NewHandleAt(pod)
	if err != nil {
		return err
	}
	defer h.Close()
	mac, _ := net.ParseMAC(att.MAC)
	link, err := findLink(h, mac)
	if err == nil && (link == nil || link.Attrs().Name != args.IfName) {
		err = fmt.Errorf("%s with MAC %s is not in %s", args.IfName, mac, args.Netns)
	}
	return err
}

// waitForLink polls for the interface with the MAC: a hot-plugged NIC takes a moment to show.
func waitForLink(h netlink.Handle, mac net.HardwareAddr, timeout time.Duration) (netlink.Link, error) {
	deadline := time.Now().Add(timeout)
	for {
		link, err := findLink(&h, mac)
		if err != nil {
			return nil, err
		}
		if link != nil {
			return link, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no interface with MAC %s appeared on the node within %s: is the NIC vendor's VF driver in the node image?", mac, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func findLink(h *netlink.Handle, mac net.HardwareAddr) (netlink.Link, error) {
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	for _, l := range links {
		if l.Attrs().HardwareAddr.String() == mac.String() {
			return l, nil
		}
	}
	return nil, nil
}
