package localcluster

import (
	"fmt"
	"path/filepath"
	"strconv"
)

// Daemon names, as used for PID files, logs and `hack/cluster logs <daemon>`.
const (
	Containerd            = "containerd"
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	APIServerForwarder    = "apiserver-forwarder"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kubelet               = "kubelet"
	KubeProxy             = "kube-proxy"
)

// daemon is one background process of the cluster.
type daemon struct {
	name string
	// binary is a file in BinDir; empty means containerd (Debian's) or the forwarder (built).
	binary string
	args   func(l layout) []string
}

// daemons in start order; Down stops them in a deliberate order of its own.
var daemons = []daemon{
	{Containerd, "", func(l layout) []string {
		return []string{"--config", l.path("containerd", "config.toml"), "--log-level", "info"}
	}},
	{Etcd, "etcd", etcdArgs},
	{KubeAPIServer, "kube-apiserver", apiserverArgs},
	{APIServerForwarder, "", func(l layout) []string {
		return []string{"--cluster-dir", l.Dir, "--to", fmt.Sprintf("127.0.0.1:%d", apiserverPort)}
	}},
	{KubeControllerManager, "kube-controller-manager", controllerManagerArgs},
	{KubeScheduler, "kube-scheduler", func(l layout) []string {
		kc := filepath.Join(l.pkiDir(), "kube-scheduler.kubeconfig")
		return []string{"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
			"--bind-address=127.0.0.1", "--leader-elect=false", "--v=1"}
	}},
	{Kubelet, "kubelet", func(l layout) []string {
		return []string{
			"--config=" + l.path("kubelet-config.yaml"),
			"--kubeconfig=" + filepath.Join(l.pkiDir(), "kubelet.kubeconfig"),
			"--root-dir=" + l.kubeletDir(),
			"--cert-dir=" + filepath.Join(l.kubeletDir(), "pki"),
			"--hostname-override=" + l.NodeName,
			"--node-ip=" + l.NodeIP,
			"--v=1",
		}
	}},
	{KubeProxy, "kube-proxy", func(l layout) []string {
		return []string{
			"--kubeconfig=" + filepath.Join(l.pkiDir(), "kube-proxy.kubeconfig"),
			"--proxy-mode=iptables",
			"--cluster-cidr=" + l.PodCIDR,
			"--hostname-override=" + l.NodeName,
			"--bind-address=" + l.NodeIP,
			"--metrics-bind-address=127.0.0.1:10249",
			"--healthz-bind-address=127.0.0.1:10256",
			// Conntrack sysctls are read-only outside the initial namespace: leave them alone.
			"--conntrack-max-per-core=0",
			"--conntrack-tcp-timeout-established=0s",
			"--conntrack-tcp-timeout-close-wait=0s",
			"--v=1",
		}
	}},
}

func daemonByName(name string) (daemon, bool) {
	for _, d := range daemons {
		if d.name == name {
			return d, true
		}
	}
	return daemon{}, false
}

// DaemonNames lists the cluster's daemons in start order.
func DaemonNames() []string {
	names := make([]string, len(daemons))
	for i, d := range daemons {
		names[i] = d.name
	}
	return names
}

func etcdArgs(l layout) []string {
	client := fmt.Sprintf("http://127.0.0.1:%d", etcdClientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort)
	return []string{
		"--name=" + l.NodeName,
		"--data-dir=" + l.path("etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=" + l.NodeName + "=" + peer,
		// A test cluster is thrown away: fsync buys nothing and costs seconds on a busy disk.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}
}

func apiserverArgs(l layout) []string {
	pki := func(f string) string { return filepath.Join(l.pkiDir(), f) }
	return []string{
		"--etcd-servers=" + fmt.Sprintf("http://127.0.0.1:%d", etcdClientPort),
		// Inside the namespace 0.0.0.0 is only loopback and the bridge.
		"--bind-address=0.0.0.0",
		"--secure-port=" + strconv.Itoa(apiserverPort),
		// Advertised on the bridge, so the kubernetes Service's endpoint is reachable from pods
		// and stays inside the namespace.
		"--advertise-address=" + l.NodeIP,
		"--service-cluster-ip-range=" + l.ServiceCIDR,
		"--client-ca-file=" + pki("ca.crt"),
		"--tls-cert-file=" + pki("apiserver.crt"),
		"--tls-private-key-file=" + pki("apiserver.key"),
		"--kubelet-client-certificate=" + pki("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + pki("apiserver-kubelet-client.key"),
		// The node's Hostname address would need DNS, which the namespace does not have (the
		// host's resolver is outside it): logs, exec and port-forward go to the node IP.
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=" + serviceIssuer,
		"--service-account-key-file=" + pki("sa.pub"),
		"--service-account-signing-key-file=" + pki("sa.key"),
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--profiling=false",
		"--v=1",
	}
}

func controllerManagerArgs(l layout) []string {
	pki := func(f string) string { return filepath.Join(l.pkiDir(), f) }
	kc := pki("kube-controller-manager.kubeconfig")
	return []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + pki("sa.key"),
		"--root-ca-file=" + pki("ca.crt"),
		"--cluster-signing-cert-file=" + pki("ca.crt"),
		"--cluster-signing-key-file=" + pki("ca.key"),
		"--service-cluster-ip-range=" + l.ServiceCIDR,
		"--cluster-name=capx-" + l.Name,
		"--profiling=false",
		"--v=1",
	}
}
