package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/capx-io/capx/test/images"
)

// Cluster is a local cluster that is up (or was, for Down).
type Cluster struct {
	l        layout
	progress io.Writer
}

// Name is the cluster's name.
func (c *Cluster) Name() string { return c.l.Name }

// Dir is the cluster's folder.
func (c *Cluster) Dir() string { return c.l.Dir }

// Kubeconfig is the path of the admin kubeconfig (context capx-<name>), valid from the host.
func (c *Cluster) Kubeconfig() string { return c.l.kubeconfig() }

// APIServerURL is the API server's address on the host's loopback.
func (c *Cluster) APIServerURL() string {
	return fmt.Sprintf("https://127.0.0.1:%d", c.l.APIServerPort)
}

// NetNS is the name of the cluster's network namespace (for `ip netns exec` when debugging).
func (c *Cluster) NetNS() string { return c.l.NetNS }

// NodeName is the name of the cluster's only node.
func (c *Cluster) NodeName() string { return c.l.NodeName }

// LogPath is the log file of a daemon (see DaemonNames). Logs stay after Down.
func (c *Cluster) LogPath(daemon string) string { return c.l.logFile(daemon) }

// ContainerdAddress is the cluster's containerd socket, for ctr --address.
func (c *Cluster) ContainerdAddress() string { return c.l.containerdSock() }

// RESTConfig returns a client configuration with admin rights.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("cluster %s: kubeconfig: %w", c.l.Name, err)
	}
	return cfg, nil
}

// LoadImage imports an image tarball (docker archive, as test/images writes) into the cluster's
// containerd, where pods find it with imagePullPolicy Never or IfNotPresent.
func (c *Cluster) LoadImage(ctx context.Context, tarball string) error {
	if err := images.Import(ctx, c.l.containerdSock(), tarball); err != nil {
		return fmt.Errorf("cluster %s: %w", c.l.Name, err)
	}
	return nil
}

// KillContainer sends SIGKILL to a running container (its ID as a pod's status reports it, with
// or without the containerd:// prefix), the way a crash or the OOM killer ends a process; the
// kubelet then restarts it as the pod's restartPolicy says.
func (c *Cluster) KillContainer(ctx context.Context, id string) error {
	id = strings.TrimPrefix(id, "containerd://")
	if _, err := run(ctx, "ctr", "--address", c.l.containerdSock(), "-n", images.CRINamespace, "tasks", "kill", "--signal", "SIGKILL", id); err != nil {
		return fmt.Errorf("cluster %s: kill container %s: %w", c.l.Name, id, err)
	}
	return nil
}

func (c *Cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.progress, "[cluster %s] %s\n", c.l.Name, fmt.Sprintf(format, args...))
}

// Open attaches to a cluster by its options, reading the layout Up saved. A cluster that was
// never started (or whose folder was removed) opens too, with the layout its name implies, so
// that Status can report it down and Down can clean up after it.
func Open(o Options) (*Cluster, error) {
	r, err := resolve(o)
	if err != nil {
		return nil, err
	}
	l, err := loadLayout(r.Dir)
	if errors.Is(err, os.ErrNotExist) {
		l, err = layout{Name: r.Name, Dir: r.Dir, BinDir: r.BinDir, NetNS: netnsPrefix + r.Name, NodeName: netnsPrefix + r.Name}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", r.Name, err)
	}
	return &Cluster{l: l, progress: r.Progress}, nil
}

func loadLayout(dir string) (layout, error) {
	var l layout
	b, err := os.ReadFile(filepath.Join(dir, stateFileName))
	if err != nil {
		return l, err
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("%s: %w", filepath.Join(dir, stateFileName), err)
	}
	return l, nil
}

// Up starts a cluster and waits until its node is Ready and the default ServiceAccount exists.
//
// If the cluster is already up (every daemon running) it is reused. If it is partly up or left
// over from a crash, Up refuses and says to run Down first. On failure Up prints the tail of the
// failing daemon's log, tears down what it started and returns the error.
func Up(ctx context.Context, o Options) (*Cluster, error) {
	if err := requireRoot(); err != nil {
		return nil, err
	}
	r, err := resolve(o)
	if err != nil {
		return nil, err
	}
	unlock, err := lockClusters(filepath.Dir(r.Dir), r.Progress)
	if err != nil {
		return nil, err
	}
	defer unlock()

	if c, reused, err := reuse(ctx, r); err != nil || reused {
		return c, err
	}
	slot, err := freeSlot(filepath.Dir(r.Dir), r.Dir)
	if err != nil {
		return nil, err
	}
	l, err := newLayout(r, slot)
	if err != nil {
		return nil, err
	}
	if err := requireTools(l); err != nil {
		return nil, err
	}
	c := &Cluster{l: l, progress: r.Progress}
	start := time.Now()
	c.logf("starting in %s (network namespace %s, API server https://127.0.0.1:%d)", l.Dir, l.NetNS, l.APIServerPort)
	if err := c.up(ctx, r); err != nil {
		c.logf("up failed: %v; tearing down what was started", err)
		downCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if derr := c.down(downCtx); derr != nil {
			c.logf("teardown after the failure: %v", derr)
		}
		return nil, fmt.Errorf("cluster %s: %w (logs: %s)", l.Name, err, l.logDir())
	}
	c.logf("up in %.1fs; kubeconfig: %s", time.Since(start).Seconds(), l.kubeconfig())
	return c, nil
}

// reuse returns the running cluster if every daemon runs, refuses a partial or stale one, and
// clears the folder of a cluster that was cleanly torn down.
func reuse(ctx context.Context, r resolved) (*Cluster, bool, error) {
	l, err := loadLayout(r.Dir)
	if err == nil {
		var running, stopped []string
		for _, d := range daemons {
			if daemonPID(l, d.name) != 0 {
				running = append(running, d.name)
			} else {
				stopped = append(stopped, d.name)
			}
		}
		c := &Cluster{l: l, progress: r.Progress}
		switch {
		case len(stopped) == 0:
			if err := c.waitReady(ctx); err != nil {
				return nil, false, fmt.Errorf("cluster %s is running but not ready: %w", l.Name, err)
			}
			c.logf("already up; reusing it (kubeconfig: %s)", l.kubeconfig())
			return c, true, nil
		case len(running) > 0:
			return nil, false, fmt.Errorf("cluster %s is partly running (stopped: %s): run hack/cluster down --name %s first", l.Name, strings.Join(stopped, ", "), l.Name)
		}
	}
	stale := leftovers(layout{Name: r.Name, Dir: r.Dir, NetNS: netnsPrefix + r.Name})
	if len(stale) > 0 {
		return nil, false, fmt.Errorf("cluster %s was not torn down (%s): run hack/cluster down --name %s first", r.Name, strings.Join(stale, "; "), r.Name)
	}
	// A clean slate: the folder of an earlier run (its logs included) is replaced.
	if err := os.RemoveAll(r.Dir); err != nil {
		return nil, false, err
	}
	return nil, false, nil
}

func (c *Cluster) up(ctx context.Context, r resolved) error {
	l := c.l
	for _, d := range []string{l.logDir(), l.runDir(), l.path("tmp"), l.path("images"), l.path("bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := saveLayout(l); err != nil {
		return err
	}
	if err := writePKI(l); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	if err := writeConfigs(l); err != nil {
		return err
	}
	if err := createCgroups(l); err != nil {
		return err
	}
	if err := createNetNS(ctx, l); err != nil {
		return err
	}
	if err := checkIsolation(ctx, l.NetNS); err != nil {
		return err
	}
	c.logf("network namespace %s: only lo and %s, no default route", l.NetNS, bridgeName)

	c.logf("building the API server forwarder and the pause image")
	forwarder, err := c.buildForwarder(ctx, r.root)
	if err != nil {
		return err
	}
	pause, err := images.Pause(ctx, r.root, l.path("images"))
	if err != nil {
		return err
	}
	// The host end of the only path into the cluster: a listening socket on the host's loopback,
	// created here (in the host namespace) and handed to the forwarder, which runs inside the
	// cluster's namespace and so can only dial the API server there.
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", l.APIServerPort))
	if err != nil {
		return fmt.Errorf("API server port %d on the host's loopback: %w (pick another with --port)", l.APIServerPort, err)
	}
	lnFile, err := ln.(*net.TCPListener).File()
	_ = ln.Close() // the duplicate in lnFile keeps the socket listening
	if err != nil {
		return err
	}
	defer lnFile.Close()

	for _, name := range []string{Containerd, Etcd, KubeAPIServer, APIServerForwarder} {
		d, _ := daemonByName(name)
		var extra []*os.File
		if name == APIServerForwarder {
			extra = []*os.File{lnFile}
		}
		if err := c.start(d, forwarder, extra...); err != nil {
			return err
		}
	}
	if err := c.waitFor(ctx, "containerd", 30*time.Second, []string{Containerd}, func() error {
		_, err := run(ctx, "ctr", "--address", l.containerdSock(), "version")
		return err
	}); err != nil {
		return err
	}
	if err := images.Import(ctx, l.containerdSock(), pause); err != nil {
		return err
	}
	client, err := c.client()
	if err != nil {
		return err
	}
	if err := c.waitFor(ctx, "the API server", 2*time.Minute, []string{Etcd, KubeAPIServer, APIServerForwarder}, func() error {
		return client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	}); err != nil {
		return err
	}
	for _, name := range []string{KubeControllerManager, KubeScheduler, Kubelet, KubeProxy} {
		d, _ := daemonByName(name)
		if err := c.start(d, forwarder); err != nil {
			return err
		}
	}
	if err := c.waitReady(ctx); err != nil {
		return err
	}
	// Nothing the daemons did may have opened a way out.
	return checkIsolation(ctx, l.NetNS)
}

func (c *Cluster) start(d daemon, forwarder string, extra ...*os.File) error {
	binary := c.l.bin(d.binary)
	switch {
	case d.name == Containerd:
		binary = "/usr/bin/containerd"
	case d.name == APIServerForwarder:
		binary = forwarder
	}
	c.logf("starting %s", d.name)
	_, err := startDaemon(c.l, d, binary, extra...)
	return err
}

// waitReady waits for the node to be Ready and for the default ServiceAccount, without which
// no pod can be created in the default namespace.
func (c *Cluster) waitReady(ctx context.Context) error {
	client, err := c.client()
	if err != nil {
		return err
	}
	all := DaemonNames()
	if err := c.waitFor(ctx, "node "+c.l.NodeName+" Ready", 2*time.Minute, all, func() error {
		node, err := client.CoreV1().Nodes().Get(ctx, c.l.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("not ready: %s", cond.Message)
			}
		}
		return errors.New("no Ready condition yet")
	}); err != nil {
		return err
	}
	return c.waitFor(ctx, "the default ServiceAccount", time.Minute, all, func() error {
		_, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// waitFor polls check until it succeeds, printing progress every 10 s, and fails early with the
// end of its log when one of the daemons it depends on has exited.
func (c *Cluster) waitFor(ctx context.Context, what string, timeout time.Duration, deps []string, check func() error) error {
	start := time.Now()
	deadline := start.Add(timeout)
	lastReport := start
	c.logf("waiting for %s", what)
	for {
		err := check()
		if err == nil {
			c.logf("%s: ok after %.1fs", what, time.Since(start).Seconds())
			return nil
		}
		for _, d := range deps {
			if daemonPID(c.l, d) == 0 {
				return fmt.Errorf("%s exited while waiting for %s; end of %s:\n%s", d, what, c.l.logFile(d), tail(c.l.logFile(d), 25))
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		if time.Since(lastReport) >= 10*time.Second {
			c.logf("still waiting for %s (%.0fs): %s", what, time.Since(start).Seconds(), firstLine(err.Error(), 160))
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// firstLine shortens an error for a progress line (readyz errors list every check).
func firstLine(s string, max int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " ..."
	}
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}

func (c *Cluster) client() (kubernetes.Interface, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(cfg)
}

// buildForwarder builds the API server forwarder (standard library only: a second or two).
func (c *Cluster) buildForwarder(ctx context.Context, root string) (string, error) {
	out := c.l.path("bin", "forwarder")
	return out, images.GoBuildStatic(ctx, root, forwarderPackage, out)
}

func saveLayout(l layout) error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(l.path(stateFileName), append(b, '\n'), 0o644)
}

// lockClusters serialises Up and Down across processes, so that two clusters started at the
// same time do not pick the same slot.
func lockClusters(base string, progress io.Writer) (func(), error) {
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(base, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		fmt.Fprintf(progress, "waiting for another cluster up or down under %s to finish\n", base)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, err
		}
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// freeSlot returns the lowest slot no other cluster under base holds while its namespace exists.
func freeSlot(base, self string) (int, error) {
	entries, err := os.ReadDir(base)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	used := map[int]bool{}
	for _, e := range entries {
		dir := filepath.Join(base, e.Name())
		if !e.IsDir() || dir == self {
			continue
		}
		if l, err := loadLayout(dir); err == nil && exists(l.netnsPath()) {
			used[l.Slot] = true
		}
	}
	for s := 0; s < maxSlots; s++ {
		if !used[s] {
			return s, nil
		}
	}
	return 0, fmt.Errorf("%d clusters already run under %s", maxSlots, base)
}

// deleteAllPods deletes every pod through the API while the kubelet still runs, so that the
// kubelet stops each sandbox itself (a clean CNI DEL, volumes unmounted), and waits for them to
// be gone.
func (c *Cluster) deleteAllPods(ctx context.Context) error {
	client, err := c.client()
	if err != nil {
		return err
	}
	nss, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	grace := int64(1)
	for _, ns := range nss.Items {
		err := client.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return c.waitFor(ctx, "pods to be deleted by the kubelet", 45*time.Second, []string{KubeAPIServer, Kubelet}, func() error {
		pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		// kube-controller-manager is already stopped, so nothing removes the Job controller's
		// batch.kubernetes.io/job-tracking finalizer: do it here, or Job pods outlive the
		// kubelet's confirmation until the wait times out. The kubelet still stops each pod.
		for _, p := range pods.Items {
			if len(p.Finalizers) > 0 {
				patch := []byte(`{"metadata":{"finalizers":null}}`)
				_, err := client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
		}
		if n := len(pods.Items); n > 0 {
			names := make([]string, 0, n)
			for _, p := range pods.Items {
				names = append(names, p.Namespace+"/"+p.Name)
			}
			sort.Strings(names)
			return fmt.Errorf("%d left: %s", n, strings.Join(names, ", "))
		}
		return nil
	})
}
