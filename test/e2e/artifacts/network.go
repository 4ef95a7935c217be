package artifacts

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// network writes network.txt: the node's network namespace (addresses, the CNI bridge and its
// ports, neighbours, routes, sockets, iptables), every pod sandbox's namespace, and, for every
// probe a pod declares, whether the node reaches it now (connect and one HTTP request, as the
// kubelet would). It tells a probe that times out on the network apart from a process too slow
// to answer.
func (c *collector) network(ctx context.Context) {
	var b strings.Builder
	run := func(title string, args ...string) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(cctx, args[0], args[1:]...).CombinedOutput()
		fmt.Fprintf(&b, "## %s\n$ %s\n%s", title, strings.Join(args, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
		b.WriteString("\n")
	}
	node := func(args ...string) []string {
		return append([]string{"ip", "netns", "exec", c.m.Cluster.NetNS()}, args...)
	}
	run("node: addresses", node("ip", "-d", "addr")...)
	run("node: bridge ports", node("bridge", "link")...)
	run("node: bridge forwarding table", node("bridge", "fdb", "show")...)
	run("node: neighbours", node("ip", "neigh")...)
	run("node: routes", node("ip", "route")...)
	run("node: socket summary", node("ss", "-s")...)
	run("node: TCP sockets", node("ss", "-tanp")...)
	run("node: iptables", node("iptables-save", "-c")...)

	pods := &corev1.PodList{}
	if err := c.m.Client.List(ctx, pods); err != nil {
		c.fail(err)
	}
	for _, p := range pods.Items {
		if p.Status.PodIP == "" || p.Spec.HostNetwork {
			continue
		}
		for _, ct := range p.Spec.Containers {
			for _, probe := range []*corev1.Probe{ct.LivenessProbe, ct.ReadinessProbe, ct.StartupProbe} {
				if probe == nil || probe.HTTPGet == nil {
					continue
				}
				port := resolvePort(probe.HTTPGet.Port, ct)
				script := fmt.Sprintf(`exec 3<>/dev/tcp/%s/%d && echo connected && printf 'GET %s HTTP/1.0\r\n\r\n' >&3 && head -c 300 <&3`,
					p.Status.PodIP, port, probe.HTTPGet.Path)
				run(fmt.Sprintf("node -> %s/%s %s:%d%s", p.Namespace, p.Name, p.Status.PodIP, port, probe.HTTPGet.Path),
					node("timeout", "3", "bash", "-c", script)...)
			}
		}
	}

	// The sandboxes' namespaces: containerd mounts them under its state directory.
	find := exec.CommandContext(ctx, "find", filepath.Join(c.m.Cluster.Dir(), "containerd", "state"), "-maxdepth", "4", "-path", "*/netns/*", "-type", "f")
	out, err := find.Output()
	c.fail(err)
	for _, f := range strings.Fields(string(out)) {
		run("sandbox "+filepath.Base(f), "nsenter", "--net="+f, "sh", "-c", "ip -br addr; ip neigh; ip route; ss -tlnp")
	}
	c.write("network.txt", []byte(b.String()))
}

// resolvePort is a probe's port number (a named port is looked up in the container's ports).
func resolvePort(port intstr.IntOrString, ct corev1.Container) int {
	if port.Type == intstr.Int {
		return port.IntValue()
	}
	for _, p := range ct.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort)
		}
	}
	return 0
}
