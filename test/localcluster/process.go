package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long a daemon gets between SIGTERM and SIGKILL.
const stopGrace = 10 * time.Second

// processes remembers the daemons this process started, so that it can reap them (a test that
// runs Up and Down must not leave zombies behind). A cluster started by another process, e.g.
// `hack/cluster up`, has daemons re-parented to PID 1, which reaps them.
var processes = struct {
	sync.Mutex
	waits map[int]chan struct{}
}{waits: map[int]chan struct{}{}}

// startDaemon starts one daemon in the background inside the cluster's network namespace
// (nsenter --net execs the binary, so the PID is the daemon's), in its own session so that a
// Ctrl-C in the terminal that ran `up` does not reach it, with stdout and stderr appended to its
// log and its PID in run/<name>.pid. extra files are passed from fd 3 on.
func startDaemon(l layout, d daemon, binary string, extra ...*os.File) (int, error) {
	logf, err := os.OpenFile(l.logFile(d.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "==== %s: starting %s %s\n", time.Now().Format(time.RFC3339), binary, strings.Join(d.args(l), " "))
	args := append([]string{"--net=" + l.netnsPath(), "--", binary}, d.args(l)...)
	cmd := exec.Command("nsenter", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = extra
	cmd.Dir = l.Dir
	// A small, explicit environment: no proxy settings or KUBECONFIG of the caller leak in.
	cmd.Env = []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + l.Dir,
		"TMPDIR=" + l.path("tmp"),
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", d.name, err)
	}
	pid := cmd.Process.Pid
	done := make(chan struct{})
	processes.Lock()
	processes.waits[pid] = done
	processes.Unlock()
	go func() {
		_ = cmd.Wait()
		close(done)
		processes.Lock()
		delete(processes.waits, pid)
		processes.Unlock()
	}()
	if err := os.WriteFile(l.pidFile(d.name), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return pid, err
	}
	return pid, nil
}

// daemonPID returns the PID of a running daemon of this cluster, or 0. A PID file whose process
// is gone, a zombie, or another program (PID reuse) counts as not running: every daemon's
// command line names the cluster folder, and that is checked.
func daemonPID(l layout, name string) int {
	b, err := os.ReadFile(l.pidFile(name))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	if !belongsTo(pid, l.Dir) {
		return 0
	}
	return pid
}

// belongsTo reports whether pid is alive (not a zombie) and its command line mentions dir.
func belongsTo(pid int, dir string) bool {
	if !alive(pid) {
		return false
	}
	// While a process is in execve (nsenter becoming the daemon) its command line reads as empty
	// for a moment: look again rather than report a fresh daemon as gone.
	for i := 0; i < 20; i++ {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil {
			return false
		}
		if len(cmdline) > 0 {
			// dir/ or dir as a whole argument: cluster "a" must not claim cluster "ab"'s daemons.
			return bytes.Contains(cmdline, []byte(dir+"/")) || bytes.Contains(cmdline, []byte(dir+"\x00"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// alive reports whether a process exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses, which may itself contain ") ".
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	return stat[i+2] != 'Z' && stat[i+2] != 'X'
}

// stopPID sends SIGTERM, waits up to grace, then SIGKILL, and waits for the process to go.
func stopPID(pid int, grace time.Duration) error {
	if !alive(pid) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if waitGone(pid, grace) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if waitGone(pid, 5*time.Second) {
		return nil
	}
	return fmt.Errorf("process %d survived SIGKILL", pid)
}

func waitGone(pid int, d time.Duration) bool {
	processes.Lock()
	done := processes.waits[pid]
	processes.Unlock()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if done != nil {
			select {
			case <-done:
				return true
			case <-time.After(50 * time.Millisecond):
			}
		} else {
			time.Sleep(50 * time.Millisecond)
		}
		if !alive(pid) {
			return true
		}
	}
	return !alive(pid)
}

// stopDaemon stops one daemon by its PID file and removes the file.
func stopDaemon(l layout, name string) error {
	pid := daemonPID(l, name)
	var err error
	if pid != 0 {
		err = stopPID(pid, stopGrace)
	}
	if rmErr := os.Remove(l.pidFile(name)); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) && err == nil {
		err = rmErr
	}
	if err != nil {
		return fmt.Errorf("stop %s: %w", name, err)
	}
	return nil
}
