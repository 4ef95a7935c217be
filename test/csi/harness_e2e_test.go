//go:build e2e

package csi_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/capx-io/capx/internal/capvco/csi"
	"github.com/capx-io/capx/test/images"
	"github.com/capx-io/capx/test/localcluster"
)

// The sidecars hack/csi-sidecars.sh builds into bin/, and the snapshot CRDs it copies there.
var sidecarBinaries = []string{"csi-provisioner", "csi-attacher", "csi-snapshotter", "snapshot-controller"}

const snapshotCRDs = "snapshot-crds"

// requireSidecars fails with the command that builds what is missing.
func requireSidecars(t *testing.T, root string) {
	t.Helper()
	for _, b := range append(sidecarBinaries, snapshotCRDs) {
		if _, err := os.Stat(filepath.Join(root, "bin", b)); err != nil {
			t.Fatalf("bin/%s is missing: run hack/csi-sidecars.sh (it builds the real CSI sidecars; several minutes the first time)", b)
		}
	}
}

// sidecar is a CSI sidecar running as a process of the test inside the platform's router,
// from where the workload cluster's API server answers on its load balancer.
type sidecar struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startSidecar runs bin/<name> in the router's network namespace; it dies with the test
// process (Pdeathsig) and is stopped when the test ends.
func startSidecar(t *testing.T, root string, p *localcluster.Platform, logDir, name string, args ...string) *sidecar {
	t.Helper()
	logPath := filepath.Join(logDir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + p.NetNS(), "--", filepath.Join(root, "bin", name)}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + logDir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	s := &sidecar{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	t.Cleanup(s.stop)
	return s
}

func (s *sidecar) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// exited reports a sidecar that is gone, with the end of its log.
func (s *sidecar) exited() error {
	select {
	case <-s.done:
		return fmt.Errorf("%s exited (%v); its log ends:\n%s", s.name, s.cmd.ProcessState, tail(s.log, 3000))
	default:
		return nil
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// registrar does for a node what the node-driver-registrar sidecar does (its module is not
// served by the Go module proxy): it answers the kubelet's plugin watcher on the kubelet's
// plugins_registry socket with the driver's name and its node socket, so that the kubelet
// registers the driver (its CSINode entry, its topology label on the Node) and calls it.
type registrar struct {
	registerapi.UnimplementedRegistrationServer
	endpoint string
	status   chan *registerapi.RegistrationStatus
}

func (r *registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: csi.DriverName, Endpoint: r.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	select {
	case r.status <- s:
	default:
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// register serves the registration socket of the kubelet whose root folder is kubeletDir,
// naming endpoint as the driver's node socket, until the test ends; it waits for the kubelet's
// answer.
func register(t *testing.T, kubeletDir, endpoint string) {
	t.Helper()
	sock := filepath.Join(kubeletDir, "plugins_registry", csi.DriverName+"-reg.sock")
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("the kubelet's registration socket: %v", err)
	}
	srv := grpc.NewServer()
	r := &registrar{endpoint: endpoint, status: make(chan *registerapi.RegistrationStatus, 1)}
	registerapi.RegisterRegistrationServer(srv, r)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); _ = os.Remove(sock) })
	select {
	case s := <-r.status:
		if !s.PluginRegistered {
			t.Fatalf("the kubelet in %s refused the driver: %s", kubeletDir, s.Error)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the kubelet in %s did not register the driver at %s within 2 minutes", kubeletDir, sock)
	}
}

// stop is an error after which waiting longer is pointless.
type stop struct{ err error }

func (s stop) Error() string { return s.err.Error() }

// eventually polls check until it passes, failing at the timeout, at once on a stop error,
// a machine that failed to boot or a sidecar that exited.
func eventually(t *testing.T, ctx context.Context, p *localcluster.Platform, sidecars []*sidecar, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		var fatal stop
		if errors.As(err, &fatal) {
			t.Fatalf("%s: %v", what, fatal.err)
		}
		for _, m := range p.Machines() {
			if m.State == localcluster.MachineFailed {
				t.Fatalf("%s: machine %d failed: %v (logs: %s/logs)", what, m.ID, m.Err, m.Dir)
			}
		}
		for _, s := range sidecars {
			if err := s.exited(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: not after %s: %v", what, timeout, err)
		}
		time.Sleep(time.Second)
	}
}

// volfileImage builds test/csi/volfile into an image, cached by content.
func volfileImage(t *testing.T, ctx context.Context, root string) images.Built {
	t.Helper()
	dir := filepath.Join(root, "_artifacts", "images-platform")
	bin := filepath.Join(dir, "bin", "volfile")
	if err := images.GoBuildStatic(ctx, root, "github.com/capx-io/capx/test/csi/volfile", bin); err != nil {
		t.Fatal(err)
	}
	b, err := images.WriteCached("capx.local/volfile", images.Spec{
		Files:      []images.File{{Path: "/volfile", Source: bin, Mode: 0o755}},
		Entrypoint: []string{"/volfile"},
		User:       images.NonRootUser,
	}, dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// shortDir is a folder for unix sockets, whose paths the kernel limits to 107 bytes.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "capx-csi-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func joinLines(lines []string) string { return strings.Join(lines, "\n") }
