package localcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Down stops the cluster and removes everything it created: processes, containers, mounts,
// the network namespace (and with it every iptables rule and interface of the cluster),
// cgroups and runtime state. The logs/ folder stays for debugging. Down is idempotent and
// also cleans up after a crashed or half-started cluster. It returns an error listing anything
// it could not remove.
func (c *Cluster) Down(ctx context.Context) error {
	unlock, err := lockClusters(filepath.Dir(c.l.Dir), c.progress)
	if err != nil {
		return err
	}
	defer unlock()
	start := time.Now()
	if err := c.down(ctx); err != nil {
		return fmt.Errorf("cluster %s: %w", c.l.Name, err)
	}
	c.logf("down in %.1fs (logs kept in %s)", time.Since(start).Seconds(), c.l.logDir())
	return nil
}

// Down tears down the cluster the options name, even one whose state file is gone.
func Down(ctx context.Context, o Options) error {
	if err := requireRoot(); err != nil {
		return err
	}
	if r, err := resolve(o); err == nil && IsPlatform(r.Dir) {
		return DownPlatform(ctx, PlatformOptions{Name: o.Name, Dir: o.Dir, BinDir: o.BinDir, Progress: o.Progress})
	}
	c, err := Open(o)
	if err != nil {
		return err
	}
	return c.Down(ctx)
}

// down runs every teardown step even when one fails, in the order the lessons of running this
// on real machines dictate, then checks that nothing is left.
func (c *Cluster) down(ctx context.Context) error {
	l := c.l
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	// Controllers first, so that no deleted pod is recreated or rescheduled.
	for _, d := range []string{KubeControllerManager, KubeScheduler} {
		keep(stopDaemon(l, d))
	}
	if daemonPID(l, KubeAPIServer) != 0 && daemonPID(l, Kubelet) != 0 && daemonPID(l, APIServerForwarder) != 0 {
		c.logf("deleting pods through the API while the kubelet runs")
		if err := c.deleteAllPods(ctx); err != nil {
			c.logf("deleting pods: %v (continuing; leftovers are removed with ctr)", err)
		}
	}
	for _, d := range []string{KubeProxy, Kubelet} {
		c.logf("stopping %s", d)
		keep(stopDaemon(l, d))
	}
	if daemonPID(l, Containerd) != 0 {
		keep(c.removeTasks(ctx))
	}
	for _, d := range []string{Containerd, APIServerForwarder, KubeAPIServer, Etcd} {
		c.logf("stopping %s", d)
		keep(stopDaemon(l, d))
	}
	if exists(l.netnsPath()) {
		if kp := l.bin("kube-proxy"); exists(kp) {
			if _, err := run(ctx, "nsenter", "--net="+l.netnsPath(), "--", kp, "--cleanup", "--proxy-mode=iptables"); err != nil {
				c.logf("kube-proxy --cleanup: %v (the namespace's rules go with it anyway)", err)
			}
		}
	}
	// Containers of pods the kubelet did not stop, shims, and anything started by hand inside
	// the namespace (ip netns exec capx-<name> ...).
	for _, pid := range clusterProcesses(l) {
		c.logf("stopping leftover process %d (%s)", pid, comm(pid))
		keep(stopPID(pid, stopGrace))
	}
	keep(unmountAll(l.Dir))
	keep(deleteNetNS(ctx, l))
	keep(removeCgroups(l))
	// The CNI library caches each attachment's result outside containerd's state.
	if cached, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", "capx-"+l.Name+"-*")); len(cached) > 0 {
		for _, f := range cached {
			keep(os.Remove(f))
		}
	}
	keep(removeState(l.Dir))
	if left := leftovers(l); len(left) > 0 {
		errs = append(errs, fmt.Errorf("left behind: %s", strings.Join(left, "; ")))
	}
	return errors.Join(errs...)
}

// removeTasks kills and deletes every containerd task the kubelet left (pods it could not
// delete), while containerd still runs; the shims exit with their tasks.
func (c *Cluster) removeTasks(ctx context.Context) error {
	ctr := func(args ...string) ([]byte, error) {
		return run(ctx, "ctr", append([]string{"--address", c.l.containerdSock(), "-n", "k8s.io"}, args...)...)
	}
	out, err := ctr("tasks", "ls", "-q")
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range strings.Fields(string(out)) {
		c.logf("removing leftover containerd task %.12s", id)
		_, _ = ctr("tasks", "kill", "-s", "SIGKILL", id)
		var err error
		for i := 0; i < 20; i++ {
			// A task that exited and went meanwhile is what this wants.
			if _, err = ctr("tasks", "delete", id); err == nil || strings.Contains(err.Error(), "not found") {
				err = nil
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// clusterProcesses finds every process in the cluster's network namespace or below its cgroup
// root, except this one.
func clusterProcesses(l layout) []int {
	ino, err := netnsInode(l.netnsPath())
	if err != nil {
		ino = 0
	}
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !alive(pid) {
			continue
		}
		base := filepath.Join("/proc", e.Name())
		if ino != 0 {
			var st syscall.Stat_t
			if syscall.Stat(filepath.Join(base, "ns", "net"), &st) == nil && st.Ino == ino {
				pids = append(pids, pid)
				continue
			}
		}
		if cg, err := os.ReadFile(filepath.Join(base, "cgroup")); err == nil && inClusterCgroup(cg, l) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func comm(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	return strings.TrimSpace(string(b))
}

// mountsUnder lists mount points at or below dir, deepest (and latest) first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	// Reverse order of mounting, then deepest first: stacked mounts come off top to bottom.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	sort.SliceStable(out, func(i, j int) bool { return strings.Count(out[i], "/") > strings.Count(out[j], "/") })
	return out
}

// unescapeMount decodes the octal escapes (\040 for a space, ...) of /proc/self/mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountAll unmounts everything below dir: the kubelet's bind mount of its root onto itself
// and its volumes, containerd's rootfs and shm mounts, the pods' network namespaces. A busy
// mount is detached lazily rather than left behind.
func unmountAll(dir string) error {
	for pass := 0; pass < 5; pass++ {
		mps := mountsUnder(dir)
		if len(mps) == 0 {
			return nil
		}
		for _, mp := range mps {
			if err := syscall.Unmount(mp, 0); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				_ = syscall.Unmount(mp, syscall.MNT_DETACH)
			}
		}
	}
	if mps := mountsUnder(dir); len(mps) > 0 {
		return fmt.Errorf("still mounted: %s", strings.Join(mps, ", "))
	}
	return nil
}

// removeState deletes the cluster folder except logs/. It never follows a mount: unmountAll ran
// first, and a folder that is still a mount point is refused.
func removeState(dir string) error {
	if len(mountsUnder(dir)) > 0 {
		return fmt.Errorf("not removing %s: mounts remain below it", dir)
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
		if e.Name() == "logs" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// leftovers lists what of the cluster still exists on the machine; empty after a clean Down.
func leftovers(l layout) []string {
	var left []string
	if exists(l.netnsPath()) {
		left = append(left, "network namespace "+l.NetNS)
	}
	if pids := clusterProcesses(l); len(pids) > 0 {
		var ps []string
		for _, p := range pids {
			ps = append(ps, fmt.Sprintf("%d (%s)", p, comm(p)))
		}
		left = append(left, "processes "+strings.Join(ps, ", "))
	}
	for _, d := range daemons {
		if l.Dir != "" && daemonPID(l, d.name) != 0 {
			left = append(left, d.name+" running")
		}
	}
	if mps := mountsUnder(l.Dir); len(mps) > 0 {
		left = append(left, "mounts "+strings.Join(mps, ", "))
	}
	if cgs := cgroupDirs(l); len(cgs) > 0 {
		left = append(left, fmt.Sprintf("%d cgroups under %s", len(cgs), cgroupRoot(l)))
	}
	return left
}

// Leftovers lists what of the cluster the options name still exists on the machine (network
// namespace, processes, mounts, cgroups); empty means fully torn down. Tests use it.
func Leftovers(o Options) ([]string, error) {
	r, err := resolve(o)
	if err != nil {
		return nil, err
	}
	if IsPlatform(r.Dir) {
		p, err := OpenPlatform(PlatformOptions{Name: o.Name, Dir: o.Dir, BinDir: o.BinDir})
		if err != nil {
			return nil, err
		}
		return platformLeftovers(p.l), nil
	}
	return leftovers(layout{Name: r.Name, Dir: r.Dir, NetNS: netnsPrefix + r.Name}), nil
}
