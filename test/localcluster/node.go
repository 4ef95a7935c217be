package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The node a machine runs. Every machine: containerd, a kubelet started with
// --cloud-provider=external (it registers its Node tainted uninitialised, without a provider
// ID, and waits for a cloud controller manager) that joins with the bootstrap token, and
// kube-proxy with the kubelet's credentials. A control-plane machine first runs etcd, the API
// server (bootstrap-token authentication on), the controller manager (it approves and signs
// the kubelets' CSRs) and the scheduler, then does what `kubeadm init` does after its control
// plane is up: the bootstrap token and the RBAC that lets it join, and once its own Node is
// registered, the control-plane label and taint.

// Timing of a workload cluster's node health, shorter than Kubernetes' defaults (a lease
// renewed every 10 s, NotReady after 50 s) so that a test sees a stopped node in seconds.
const (
	nodeLeaseSeconds     = 20 // the kubelet renews its lease every quarter of this
	nodeStatusFrequency  = "5s"
	nodeMonitorGrace     = "20s"
	kubeProxyHealthzPort = 10256
	bootstrapTokenGroup  = "system:bootstrappers:kubeadm:default-node-token"
	controlPlaneLabel    = "node-role.kubernetes.io/control-plane"
	excludeFromLBsLabel  = "node.kubernetes.io/exclude-from-external-load-balancers"
)

func writeNodeConfigs(l layout, nb NodeBootstrap) error {
	files := map[string]string{
		l.path("containerd", "config.toml"):        containerdConfig(l),
		l.path("cni", "net.d", "10-capx.conflist"): nodeCNIConfig(l),
		l.path("kubelet-config.yaml"):              nodeKubeletConfig(l),
		l.path("resolv.conf"):                      "# platform machine: no DNS service\nnameserver 127.0.0.1\n",
	}
	for p, content := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// nodeCNIConfig is a bridge network for the machine's /24 of the pod range. Unlike the
// management cluster's, pods get a default route through the machine: its namespace routes
// only into the platform, and pods answer clients on other machines.
func nodeCNIConfig(l layout) string {
	gw, _ := firstService(l.PodCIDR)
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "capx-" + l.Name,
		"plugins": []any{map[string]any{
			"type":             "bridge",
			"bridge":           bridgeName,
			"isGateway":        true,
			"isDefaultGateway": true,
			"ipMasq":           false,
			"hairpinMode":      true,
			"ipam": map[string]any{
				"type":    "host-local",
				"dataDir": l.path("cni", "ipam"),
				"ranges":  [][]map[string]string{{{"subnet": l.PodCIDR, "gateway": gw}}},
			},
		}},
	}
	b, _ := json.MarshalIndent(conf, "", "  ")
	return string(b) + "\n"
}

// nodeKubeletConfig is the management cluster's kubelet configuration with the node's health
// reported more often.
func nodeKubeletConfig(l layout) string {
	return kubeletConfig(l) + strings.Join([]string{
		"nodeStatusUpdateFrequency: " + nodeStatusFrequency,
		fmt.Sprintf("nodeLeaseDurationSeconds: %d", nodeLeaseSeconds),
	}, "\n") + "\n"
}

func kubeletDaemon() daemon {
	return daemon{Kubelet, "kubelet", func(l layout) []string {
		return []string{
			"--config=" + l.path("kubelet-config.yaml"),
			"--bootstrap-kubeconfig=" + filepath.Join(l.pkiDir(), bootstrapKubeconfig),
			"--kubeconfig=" + filepath.Join(l.pkiDir(), kubeletKubeconfig),
			"--cert-dir=" + filepath.Join(l.pkiDir(), kubeletCertDir),
			"--root-dir=" + l.kubeletDir(),
			"--hostname-override=" + l.NodeName,
			"--node-ip=" + l.NodeIP,
			"--cloud-provider=external",
			"--v=1",
		}
	}}
}

func kubeProxyDaemon(clusterPods string) daemon {
	return daemon{KubeProxy, "kube-proxy", func(l layout) []string {
		return []string{
			"--kubeconfig=" + filepath.Join(l.pkiDir(), kubeletKubeconfig),
			"--proxy-mode=iptables",
			"--cluster-cidr=" + clusterPods,
			"--hostname-override=" + l.NodeName,
			"--bind-address=" + l.NodeIP,
			"--metrics-bind-address=127.0.0.1:10249",
			// The cloud controller manager probes it from another machine (externalTrafficPolicy
			// Cluster's health check).
			fmt.Sprintf("--healthz-bind-address=%s:%d", l.NodeIP, kubeProxyHealthzPort),
			"--conntrack-max-per-core=0",
			"--conntrack-tcp-timeout-established=0s",
			"--conntrack-tcp-timeout-close-wait=0s",
			"--v=1",
		}
	}}
}

func controlPlaneDaemons(cluster string) []daemon {
	return []daemon{
		{Etcd, "etcd", etcdArgs},
		{KubeAPIServer, "kube-apiserver", func(l layout) []string {
			return append(apiserverArgs(l), "--enable-bootstrap-token-auth=true")
		}},
		{KubeControllerManager, "kube-controller-manager", func(l layout) []string {
			return append(controllerManagerArgs(l),
				"--cluster-name="+cluster,
				"--node-monitor-grace-period="+nodeMonitorGrace,
				"--node-monitor-period=2s")
		}},
		{KubeScheduler, "kube-scheduler", func(l layout) []string {
			kc := filepath.Join(l.pkiDir(), "kube-scheduler.kubeconfig")
			return []string{"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
				"--bind-address=127.0.0.1", "--leader-elect=false", "--v=1"}
		}},
	}
}

// bootNode starts the node's daemons in order, waiting for each one the next needs.
func (m *machine) bootNode(ctx context.Context, nb NodeBootstrap) error {
	l := m.l
	c := &Cluster{l: l, progress: m.p.progress}
	d := daemon{Containerd, "", func(l layout) []string {
		return []string{"--config", l.path("containerd", "config.toml"), "--log-level", "warn"}
	}}
	if err := c.start(d, ""); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "containerd", time.Minute, []string{Containerd}, func() error {
		_, err := run(ctx, "ctr", "--address", l.containerdSock(), "version")
		return err
	}); err != nil {
		return err
	}
	if err := m.importImages(ctx); err != nil {
		return err
	}
	if nb.Role == RoleControlPlane {
		if err := m.bootControlPlane(ctx, c, nb); err != nil {
			return err
		}
	}
	if err := c.start(kubeletDaemon(), ""); err != nil {
		return err
	}
	// The kubelet writes its kubeconfig once the controller manager signed its CSR, which needs
	// the load balancer to reach a control plane: that can take a while on a busy machine.
	if err := c.waitFile(ctx, filepath.Join(l.pkiDir(), kubeletKubeconfig), 10*time.Minute, []string{Containerd, Kubelet}); err != nil {
		return err
	}
	if err := c.start(kubeProxyDaemon(nb.PodCIDR), ""); err != nil {
		return err
	}
	if nb.Role == RoleControlPlane {
		return m.markControlPlane(ctx, c)
	}
	return nil
}

// adminClient reaches the machine's API server on its loopback, from inside its namespace.
func (m *machine) adminClient() (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(m.l.pkiDir(), "admin.kubeconfig"))
	if err != nil {
		return nil, err
	}
	path := m.l.netnsPath()
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return dialIn(ctx, path, network, addr)
	}
	cfg.Timeout = 15 * time.Second
	return kubernetes.NewForConfig(cfg)
}

func (m *machine) bootControlPlane(ctx context.Context, c *Cluster, nb NodeBootstrap) error {
	ds := controlPlaneDaemons(nb.Cluster)
	for _, d := range ds[:2] {
		if err := c.start(d, ""); err != nil {
			return err
		}
	}
	client, err := m.adminClient()
	if err != nil {
		return err
	}
	if err := c.waitFor(ctx, "the API server", 5*time.Minute, []string{Etcd, KubeAPIServer}, func() error {
		return client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	}); err != nil {
		return err
	}
	for _, d := range ds[2:] {
		if err := c.start(d, ""); err != nil {
			return err
		}
	}
	return c.waitFor(ctx, "the bootstrap token and its RBAC", 2*time.Minute, []string{KubeAPIServer}, func() error {
		return allowJoin(ctx, client, nb.Token)
	})
}

// allowJoin creates the bootstrap token and what `kubeadm init` binds for it: its group may
// create CSRs and have node-client CSRs approved, and nodes may read what kube-proxy needs.
func allowJoin(ctx context.Context, client kubernetes.Interface, token string) error {
	id, secret, err := splitToken(token)
	if err != nil {
		return err
	}
	tok := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: metav1.NamespaceSystem},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id": id, "token-secret": secret, "usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
			"auth-extra-groups": bootstrapTokenGroup, "expiration": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339),
		},
	}
	if _, err := client.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, tok, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, b := range []struct{ name, role, kind, subject string }{
		{"capx:kubelet-bootstrap", "system:node-bootstrapper", rbacv1.GroupKind, bootstrapTokenGroup},
		{"capx:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", rbacv1.GroupKind, bootstrapTokenGroup},
		{"capx:node-proxier", "system:node-proxier", rbacv1.GroupKind, "system:nodes"},
	} {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: b.name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: b.kind, Name: b.subject}},
		}
		if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// markControlPlane labels and taints the control plane's Node as `kubeadm init` does, once the
// kubelet has registered it.
func (m *machine) markControlPlane(ctx context.Context, c *Cluster) error {
	client, err := m.adminClient()
	if err != nil {
		return err
	}
	return c.waitFor(ctx, "node "+m.l.NodeName+" marked control plane", 5*time.Minute, []string{KubeAPIServer, Kubelet}, func() error {
		node, err := client.CoreV1().Nodes().Get(ctx, m.l.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[controlPlaneLabel], node.Labels[excludeFromLBsLabel] = "", ""
		if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == controlPlaneLabel }) {
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: controlPlaneLabel, Effect: corev1.TaintEffectNoSchedule})
		}
		// An update, not a patch of the taint list: the cloud controller manager may remove the
		// uninitialised taint meanwhile, and a conflict makes this read the Node again.
		_, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
}
