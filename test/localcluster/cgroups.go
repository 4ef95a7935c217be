package localcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
)

const cgroupFS = "/sys/fs/cgroup"

// hierarchies lists the mounted cgroup v1 hierarchies (cpu, memory, pids, name=systemd, ...).
func hierarchies() ([]string, error) {
	entries, err := os.ReadDir(cgroupFS)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join(cgroupFS, e.Name())
		// Symlinks such as cpu,cpuacct -> cpu would list a hierarchy twice.
		if e.IsDir() && e.Type()&os.ModeSymlink == 0 && exists(filepath.Join(p, "cgroup.procs")) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no cgroup v1 hierarchy under %s (the kubelet here is set up for cgroup v1)", cgroupFS)
	}
	return out, nil
}

// clusterCPUShares is the cpu.shares of a cluster's cgroup root: as much as four busy host
// threads per CPU, so the pods keep most of a loaded machine without taking it from the
// cluster's own daemons (which run on the host, outside it).
func clusterCPUShares() int { return 4 * 1024 * runtime.NumCPU() }

// createCgroups creates the cluster's cgroup root in every hierarchy: the kubelet refuses a
// cgroupRoot that does not exist, and a root of its own keeps two clusters' kubepods apart.
func createCgroups(l layout) error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		dir := filepath.Join(h, strings.TrimPrefix(cgroupRoot(l), "/"))
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		// In cgroup v1 a child cgroup competes with every task of its parent as one task: the
		// whole cluster's pods would weigh as much as one thread of the API server, etcd or a
		// go test on the host, and starve under load (probes time out, the kubelet restarts
		// healthy managers). The cluster's root weighs as much as clusterCPUShares tasks.
		if exists(filepath.Join(dir, "cpu.shares")) {
			if err := os.WriteFile(filepath.Join(dir, "cpu.shares"), []byte(strconv.Itoa(clusterCPUShares())), 0o644); err != nil {
				return fmt.Errorf("cgroup %s/cpu.shares: %w", dir, err)
			}
		}
		// A new cpuset cgroup starts with no CPUs and no memory nodes: no task could join it.
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return fmt.Errorf("cgroup %s/%s: %w", dir, f, err)
				}
			}
		}
	}
	return nil
}

// cgroupDirs lists the cluster's cgroups that exist, deepest first.
func cgroupDirs(l layout) []string {
	hs, _ := hierarchies()
	var dirs []string
	for _, h := range hs {
		root := filepath.Join(h, strings.TrimPrefix(cgroupRoot(l), "/"))
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	return dirs
}

// removeCgroups removes the cluster's cgroup trees; it fails while a process is still in one.
func removeCgroups(l layout) error {
	var errs []error
	for _, d := range cgroupDirs(l) {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// inClusterCgroup reports whether a /proc/<pid>/cgroup content places the process below the
// cluster's cgroup root (containers of its pods).
func inClusterCgroup(procCgroup []byte, l layout) bool {
	root := cgroupRoot(l)
	for _, line := range strings.Split(string(procCgroup), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && (parts[2] == root || strings.HasPrefix(parts[2], root+"/")) {
			return true
		}
	}
	return false
}
