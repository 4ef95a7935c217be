//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capx-io/capx/test/e2e/artifacts"
	"github.com/capx-io/capx/test/e2e/install"
	"github.com/capx-io/capx/test/localcluster"
)

// The suites share one management cluster (installed with the manifests flow) and, for move, a
// second one installed with clusterctl init. Names are fixed so that a run killed by its
// timeout is cleaned up by the next run and by `make e2e`.
const (
	clusterA = "e2e-a"
	clusterB = "e2e-b"
)

var (
	root string
	// shared is set up once, on first use, and torn down by TestMain.
	shared struct {
		once sync.Once
		err  error
		kit  *install.Kit
		a    *install.Management
	}
	kitOnce sync.Once
	kitErr  error
)

func TestMain(m *testing.M) {
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	root = filepath.Join(wd, "..", "..")
	_ = os.Setenv("CAPX_ROOT", root)
	if err := os.RemoveAll(artifactsDir()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	// The clusters go whatever happened; a leftover fails the run.
	for _, name := range []string{clusterA, clusterB} {
		if err := downCluster(name); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func artifactsDir(elem ...string) string {
	return filepath.Join(append([]string{root, "_artifacts", "e2e"}, elem...)...)
}

// kit builds the images and renders the components once per run.
func kit(t *testing.T) *install.Kit {
	t.Helper()
	kitOnce.Do(func() {
		requireRoot()
		start := time.Now()
		shared.kit, kitErr = install.NewKit(context.Background(), install.DefaultPaths(root), progress{})
		record("kit: images and components", time.Since(start))
	})
	if kitErr != nil {
		t.Fatalf("preparing images and components: %v", kitErr)
	}
	return shared.kit
}

func requireRoot() {
	if os.Geteuid() != 0 && kitErr == nil {
		kitErr = fmt.Errorf("the e2e suites need root (network namespaces, containerd, the kubelet): run them as root (make e2e)")
	}
}

// mgmtA is the shared management cluster, brought up and installed (manifests flow) on first
// use. A failed setup fails every suite that needs it, with the setup's artifacts.
func mgmtA(t *testing.T) *install.Management {
	t.Helper()
	k := kit(t)
	shared.once.Do(func() {
		shared.a, shared.err = upAndInstall(clusterA, k, install.FlowManifests)
	})
	if shared.err != nil {
		t.Fatalf("setting up management cluster %s: %v (artifacts: %s)", clusterA, shared.err, artifactsDir("setup"))
	}
	return shared.a
}

// upAndInstall brings a cluster up and installs Cluster API and the providers on it; on
// failure it collects artifacts into _artifacts/e2e/setup/<cluster>.
func upAndInstall(name string, k *install.Kit, flow install.Flow) (*install.Management, error) {
	return upAndInstallWith(localcluster.Options{Name: name}, k, flow)
}

// upAndInstallWith is upAndInstall for a cluster with options of its own (o.Name is required).
func upAndInstallWith(o localcluster.Options, k *install.Kit, flow install.Flow) (*install.Management, error) {
	name := o.Name
	o.Progress = progress{}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	if err := downCluster(name); err != nil { // a run killed by its timeout
		return nil, err
	}
	c, err := localcluster.Up(ctx, o)
	if err != nil {
		return nil, err
	}
	record("up "+name, time.Since(start))
	start = time.Now()
	m, err := k.Install(ctx, c, flow)
	if err != nil {
		if m2, cerr := install.Connect(c, k.Paths, progress{}); cerr == nil {
			_ = artifacts.Collect(ctx, m2, k.Repository, artifactsDir("setup", name))
		}
		return nil, err
	}
	record(fmt.Sprintf("install %s (%s)", name, flow), time.Since(start))
	return m, nil
}

// upInBackground brings a second cluster up and installs it while the test goes on; the
// returned function waits for it (failing the test, with the setup's artifacts, when the setup
// failed). The cluster is taken down when the test ends.
func upInBackground(t *testing.T, o localcluster.Options, k *install.Kit, flow install.Flow) func() *install.Management {
	t.Helper()
	type result struct {
		m   *install.Management
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := upAndInstallWith(o, k, flow)
		done <- result{m, err}
	}()
	var once sync.Once
	var r result
	wait := func() result {
		once.Do(func() { r = <-done })
		return r
	}
	t.Cleanup(func() {
		wait()
		if err := downCluster(o.Name); err != nil {
			t.Errorf("tearing down %s: %v", o.Name, err)
		}
	})
	return func() *install.Management {
		t.Helper()
		if r := wait(); r.err != nil {
			t.Fatalf("setting up cluster %s: %v (artifacts: %s)", o.Name, r.err, artifactsDir("setup", o.Name))
		}
		return r.m
	}
}

func downCluster(name string) error {
	start := time.Now()
	o := localcluster.Options{Name: name, Progress: progress{}}
	c, err := localcluster.Open(o)
	if err != nil {
		return err
	}
	if !c.Status(context.Background()).Started {
		if left, _ := localcluster.Leftovers(o); len(left) == 0 {
			return nil
		}
	}
	if err := c.Down(context.Background()); err != nil {
		return err
	}
	left, err := localcluster.Leftovers(o)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("cluster %s left behind: %s", name, strings.Join(left, "; "))
	}
	record("down "+name, time.Since(start))
	return nil
}

// collectOnFailure registers a cleanup that, when the test failed, writes the artifacts of each
// cluster into _artifacts/e2e/<suite>/<cluster>.
func collectOnFailure(t *testing.T, suite string, clusters ...*install.Management) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, m := range clusters {
			if m == nil {
				continue
			}
			dir := artifactsDir(suite, m.Name())
			if err := artifacts.Collect(context.Background(), m, shared.kit.Repository, dir); err != nil {
				t.Logf("artifacts of %s: %v", m.Name(), err)
			}
			t.Logf("artifacts of cluster %s: %s", m.Name(), dir)
		}
	})
}

var timings struct {
	sync.Mutex
	lines []string
}

// record notes how long a step took: in the test output (TIMING lines) and in
// _artifacts/e2e/timings.txt.
func record(what string, d time.Duration) {
	line := fmt.Sprintf("TIMING %-60s %6.1fs", what, d.Seconds())
	fmt.Fprintln(os.Stderr, line)
	timings.Lock()
	defer timings.Unlock()
	timings.lines = append(timings.lines, line)
	_ = os.MkdirAll(artifactsDir(), 0o755)
	_ = os.WriteFile(artifactsDir("timings.txt"), []byte(strings.Join(timings.lines, "\n")+"\n"), 0o644)
}

// progress sends the harness' and installers' progress lines to stderr, where `go test -v`
// shows them as they happen (t.Log would hold them until the test ends).
type progress struct{}

func (progress) Write(p []byte) (int, error) { return os.Stderr.Write(p) }

// step runs one step of a suite, recording its time.
func step(t *testing.T, what string, fn func()) {
	t.Helper()
	start := time.Now()
	fmt.Fprintf(os.Stderr, "=== %s: %s\n", t.Name(), what)
	fn()
	record(t.Name()+": "+what, time.Since(start))
}
