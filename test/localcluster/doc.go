// Package localcluster runs a real single-node Kubernetes management cluster on this machine,
// built from the parts hack/toolchain.sh compiles (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kubelet, kube-proxy) and Debian's containerd, runc and CNI plugins.
//
// Every daemon is a background process started inside a network namespace the package creates
// (capx-<name>) whose only interfaces are loopback and the CNI bridge and which has no default
// route: no packet of the cluster can leave the machine, by construction. Up checks that before
// it starts anything. The host reaches the API server through a forwarder that accepts on a
// listening socket bound to the host's 127.0.0.1 and dials the API server on the namespace's
// own loopback; see docs/local-cluster.md for why this cannot leak.
//
// Each cluster keeps everything in one folder (by default _artifacts/clusters/<name> in the
// repository): configuration, certificates, the admin kubeconfig, PID files under run/, daemon
// logs under logs/ (kept by Down for debugging), and all runtime state (removed by Down). Two
// clusters with different names run side by side, e.g. for clusterctl move tests.
//
// Usage from Go (root is required; hack/cluster is the command-line front end):
//
//	c, err := localcluster.Up(ctx, localcluster.Options{Name: "a"})
//	if err != nil { ... }
//	defer c.Down(context.Background())
//	cfg, err := c.RESTConfig()            // or c.Kubeconfig() for a path
//	err = c.LoadImage(ctx, "manager.tar") // a tarball from test/images
package localcluster
