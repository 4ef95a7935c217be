package controllers_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// managerProcess is the real manager binary (cmd/manager, as the runner Pods run it) started as a
// process of its own, as a Deployment runs it: its memory and CPU are its own, not the test's
// fixtures', client's and kubelet stand-in's. It reaches the API server through a proxy in the
// test that counts its writes (writeCounter), and serves its metrics on a local port.
type managerProcess struct {
	cmd     *exec.Cmd
	metrics string
	// pprof is the base URL of the manager's /debug/pprof (--profiler-address).
	pprof string
	log   string
}

// startManagerProcess starts the manager with its defaults and the given flags against env, its
// requests counted by writes, until the benchmark ends.
func startManagerProcess(b *testing.B, writes *writeCounter, flags ...string) *managerProcess {
	b.Helper()
	bin, err := env.RunnerBinary() // cmd/manager: the runner is the manager binary
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	// The binary is the runner when it is called runner (the Pods'), the manager otherwise.
	manager := filepath.Join(dir, "manager")
	if err := os.Symlink(bin, manager); err != nil {
		b.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bench"] = &clientcmdapi.Cluster{Server: countingProxy(b, writes)}
	cfg.AuthInfos["bench"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	cfg.CurrentContext = "bench"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		b.Fatal(err)
	}
	m := &managerProcess{metrics: "http://" + freeAddr(b) + "/metrics", pprof: "http://" + freeAddr(b) + "/debug/pprof/",
		log: filepath.Join(dir, "manager.log")}
	logFile, err := os.Create(m.log)
	if err != nil {
		b.Fatal(err)
	}
	args := append([]string{"--kubeconfig=" + kubeconfig, "--runner-image=capx.test/manager:dev",
		"--metrics-bind-address=" + strings.TrimPrefix(strings.TrimSuffix(m.metrics, "/metrics"), "http://"), "--health-addr=0",
		"--profiler-address=" + strings.TrimPrefix(strings.TrimSuffix(m.pprof, "/debug/pprof/"), "http://")}, flags...)
	m.cmd = exec.Command(manager, args...)
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	if err := m.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- m.cmd.Wait(); _ = logFile.Close() }()
	b.Cleanup(func() {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = m.cmd.Process.Kill()
			<-exited
		}
		if b.Failed() {
			out, _ := os.ReadFile(m.log)
			b.Logf("manager log (last 8 KiB):\n%s", out[max(0, len(out)-8<<10):])
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for !m.up() {
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(m.log)
			b.Fatalf("the manager process serves no metrics after 2 minutes:\n%s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.Logf("manager process %d started: %s", m.cmd.Process.Pid, strings.Join(flags, " "))
	return m
}

func (m *managerProcess) up() bool {
	resp, err := http.Get(m.metrics)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// countingProxy serves the API server of env on a local plain-HTTP port, with env's
// credentials, counting what passes through writes; it returns its URL.
func countingProxy(b *testing.B, writes *writeCounter) string {
	b.Helper()
	target, err := url.Parse(env.Config.Host)
	if err != nil {
		b.Fatal(err)
	}
	rt, err := rest.TransportFor(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = writes.wrap(rt)
	proxy.FlushInterval = -1 // watches stream
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	b.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}

func freeAddr(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// metric sums the samples of a metric family whose labels include label="value".
func (m *managerProcess) metric(b *testing.B, family, label, value string) float64 {
	resp, err := http.Get(m.metrics)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	sum, want := 0.0, label+`="`+value+`"`
	for line := range strings.SplitSeq(string(body), "\n") {
		name, rest, ok := strings.Cut(line, "{")
		if !ok || name != family {
			continue
		}
		labels, v, ok := strings.Cut(rest, "} ")
		if !ok || !strings.Contains(","+labels+",", ","+want+",") {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			b.Fatalf("metric %s: %v", line, err)
		}
		sum += f
	}
	return sum
}

// reconciles is the manager's count of finished TerraformMachine reconciles.
func (m *managerProcess) reconciles(b *testing.B) float64 {
	return m.metric(b, "controller_runtime_reconcile_total", "controller", "TerraformMachine")
}

// idle reports whether the TerraformMachine work queue is empty and no reconcile runs.
func (m *managerProcess) idle(b *testing.B) bool {
	return m.metric(b, "workqueue_depth", "name", "TerraformMachine") == 0 &&
		m.metric(b, "controller_runtime_active_workers", "controller", "TerraformMachine") == 0
}

// status reads a field of the process's /proc status in bytes (VmRSS, VmHWM).
func (m *managerProcess) status(b *testing.B, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	b.Fatalf("no %s in the manager's /proc status", field)
	return 0
}

// saveProfile writes the manager's pprof profile name (heap, allocs, goroutine) to
// $CAPX_BENCH_PROFILE_DIR/file; without that variable it does nothing. Read it with
// `go tool pprof -top -sample_index=inuse_space FILE`.
func (m *managerProcess) saveProfile(b *testing.B, name, file string) {
	dir := os.Getenv("CAPX_BENCH_PROFILE_DIR")
	if dir == "" {
		return
	}
	resp, err := http.Get(m.pprof + name)
	if err != nil {
		b.Fatalf("profile %s of the manager: %v", name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("profile %s of the manager: %s %v", name, resp.Status, err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), body, 0o644); err != nil {
		b.Fatal(err)
	}
}

// resetPeak resets the process's VmHWM to its current RSS.
func (m *managerProcess) resetPeak(b *testing.B) {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", m.cmd.Process.Pid), []byte("5"), 0); err != nil {
		b.Fatalf("reset the manager's peak RSS: %v", err)
	}
}

// cpu is the CPU time the manager process has used (user and system).
func (m *managerProcess) cpu(b *testing.B) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// waitReconciled waits until the manager has finished want TerraformMachine reconciles in all and
// its queue is idle.
func (m *managerProcess) waitReconciled(b *testing.B, what string, n int, want float64) {
	b.Helper()
	waitFleet(b, what, n, fleetTimeout(n, 5*time.Minute), 50*time.Millisecond, n, func() int {
		if left := want - m.reconciles(b); left > 0 || !m.idle(b) {
			return n - int(max(left, 1))
		}
		return n
	})
}
