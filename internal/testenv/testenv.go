// Package testenv starts a real kube-apiserver and etcd (controller-runtime's envtest) on the
// binaries hack/toolchain.sh builds, with the toolkit's CRDs and Cluster API's own CRDs
// installed, and optionally kube-controller-manager so Jobs and garbage collection behave as in
// a real cluster. One environment per test package, started from TestMain:
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Run(m, testenv.Options{}, &env)) }
package testenv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/capx-io/capx/internal/scheme"
)

// Options choose what runs beside the API server.
type Options struct {
	// ControllerManager starts kube-controller-manager with the Job, garbage-collector,
	// namespace, service-account and resource-quota controllers, so Jobs create Pods, a Pod's
	// status completes or fails its Job, deleting an owner deletes what it owns, and a
	// ResourceQuota is enforced (admission enforces only what the quota controller counted).
	ControllerManager bool

	// CAPI runs Cluster API's core manager (with its webhooks), so CAPI's own controllers
	// reconcile Clusters, Machines and MachinePools.
	CAPI bool

	// CRDPaths adds directories or files of CRDs to install.
	CRDPaths []string
}

// Env is a running test environment.
type Env struct {
	// Config reaches the API server as cluster admin.
	Config *rest.Config
	// Client is an uncached client with the toolkit's scheme.
	Client client.Client
	// Scheme has every kind the toolkit uses.
	Scheme *runtime.Scheme
	// KubeconfigPath is an admin kubeconfig file for processes started by tests.
	KubeconfigPath string
	// Root is the repository root.
	Root string

	env     *envtest.Environment
	kcm     *exec.Cmd
	capi    *exec.Cmd
	dir     string
	log     SyncBuffer // kube-controller-manager's output, read by tests while it runs
	capiLog SyncBuffer

	nsMu  sync.Mutex
	nsSeq int
}

// Run starts an environment, stores it in *env, runs the package's tests and stops it. It
// returns the exit code for os.Exit. A failure to start is a test failure, never a skip.
func Run(m *testing.M, opts Options, env **Env) int {
	// Controller logs go to stderr with CAPX_TEST_LOG=<verbosity>, else nowhere.
	if v := os.Getenv("CAPX_TEST_LOG"); v != "" {
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		_ = fs.Set("v", v)
		ctrl.SetLogger(klog.NewKlogr())
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	e, err := Start(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stop: %v\n", err)
	}
	return code
}

// Start starts the API server (and kube-controller-manager if asked) and installs the CRDs.
func Start(opts Options) (*Env, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets, err := assetsDir(root)
	if err != nil {
		return nil, err
	}
	capiDir, err := moduleDir(root, "sigs.k8s.io/cluster-api")
	if err != nil {
		return nil, err
	}
	crds := append([]string{
		filepath.Join(root, "config", "crd", "bases"),
		filepath.Join(capiDir, "core", "config", "crd", "bases"),
		filepath.Join(capiDir, "cmd", "clusterctl", "config", "crd", "bases", "clusterctl.cluster.x-k8s.io_providers.yaml"),
	}, opts.CRDPaths...)

	e := &Env{Scheme: scheme.New(), Root: root}
	e.env = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     crds,
		ErrorIfCRDPathMissing: true,
		Scheme:                e.Scheme,
	}
	if opts.CAPI {
		e.env.WebhookInstallOptions = capiWebhooks(capiDir)
	}
	if e.Config, err = e.env.Start(); err != nil {
		return nil, fmt.Errorf("start kube-apiserver and etcd from %s: %w", assets, err)
	}
	// Requests from many concurrent reconcilers in one test must not be throttled client-side.
	e.Config.QPS, e.Config.Burst = 500, 1000
	if e.Client, err = client.New(e.Config, client.Options{Scheme: e.Scheme}); err != nil {
		_ = e.env.Stop()
		return nil, err
	}
	if e.dir, err = os.MkdirTemp("", "capx-testenv-"); err != nil {
		_ = e.env.Stop()
		return nil, err
	}
	e.KubeconfigPath = filepath.Join(e.dir, "kubeconfig")
	if err := os.WriteFile(e.KubeconfigPath, e.env.KubeConfig, 0o600); err != nil {
		_ = e.Stop()
		return nil, err
	}
	if err := e.installAdmissionPolicies(context.Background()); err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("install admission policies: %w", err)
	}
	// The ClusterRoles the manager binds in namespaces: the runner's, every CAPTF Job runs with
	// (the kubelet stand-in runs Pods as their ServiceAccounts, so the runner has exactly the
	// rights it has on a cluster), and the manager's own there.
	for _, role := range []string{"runner_role.yaml", "namespace_role.yaml"} {
		if err := e.Apply(context.Background(), filepath.Join(root, "config", "rbac", role)); err != nil {
			_ = e.Stop()
			return nil, fmt.Errorf("install ClusterRole %s: %w", role, err)
		}
	}
	if opts.ControllerManager {
		if err := e.startControllerManager(assets); err != nil {
			_ = e.Stop()
			return nil, err
		}
	}
	if opts.CAPI {
		if err := e.startCAPI(); err != nil {
			_ = e.Stop()
			return nil, err
		}
	}
	return e, nil
}

func (e *Env) startControllerManager(assets string) error {
	bin := filepath.Join(assets, "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("kube-controller-manager not found in %s: run `make toolchain`", assets)
	}
	kubeconfig, err := e.controllerManagerKubeconfig()
	if err != nil {
		return err
	}
	e.kcm = exec.Command(bin,
		"--kubeconfig="+kubeconfig,
		"--controllers=job,garbagecollector,namespace,serviceaccount,resourcequota",
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--concurrent-job-syncs=10",
		"--concurrent-gc-syncs=10",
	)
	e.kcm.Stdout, e.kcm.Stderr = &e.log, &e.log
	if err := e.kcm.Start(); err != nil {
		return fmt.Errorf("start kube-controller-manager: %w", err)
	}
	return nil
}

// controllerManagerKubeconfig writes the admin kubeconfig acting as system:kube-controller-manager,
// the identity kube-controller-manager has without --use-service-account-credentials, so
// admission policies that tell its controllers apart (config/admission/captf-state-protection.yaml)
// see them as on a real cluster.
func (e *Env) controllerManagerKubeconfig() (string, error) {
	cfg, err := clientcmd.Load(e.env.KubeConfig)
	if err != nil {
		return "", fmt.Errorf("read the admin kubeconfig: %w", err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate, a.ImpersonateGroups = "system:kube-controller-manager", []string{"system:masters"}
	}
	path := filepath.Join(e.dir, "kube-controller-manager.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("write the kube-controller-manager kubeconfig: %w", err)
	}
	return path, nil
}

// stopProcess interrupts a child process and kills it after 10 s.
func stopProcess(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// ControllerManagerLog returns what kube-controller-manager printed, for failing tests.
func (e *Env) ControllerManagerLog() string { return e.log.String() }

// Stop stops everything Start started.
func (e *Env) Stop() error {
	var errs []error
	for _, cmd := range []*exec.Cmd{e.capi, e.kcm} {
		stopProcess(cmd)
	}
	if e.env != nil {
		errs = append(errs, e.env.Stop())
	}
	if e.dir != "" {
		errs = append(errs, os.RemoveAll(e.dir))
	}
	return errors.Join(errs...)
}

// As returns a client acting as the named user, with full rights (system:masters), so only
// admission decides what it may do.
func (e *Env) As(t testing.TB, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters"}}
	c, err := client.New(cfg, client.Options{Scheme: e.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// NewNamespace creates a namespace unique to the test and deletes it when the test ends.
func (e *Env) NewNamespace(t testing.TB) string {
	t.Helper()
	e.nsMu.Lock()
	e.nsSeq++
	name := fmt.Sprintf("t%d-%s", e.nsSeq, sanitize(t.Name()))
	e.nsMu.Unlock()
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-")
	}
	ns := Namespace(name)
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), ns) })
	return name
}

func sanitize(s string) string {
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

// RepoRoot finds the repository root (the folder holding go.mod) from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: go.mod not found above the working directory")
		}
		dir = parent
	}
}

func assetsDir(root string) (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(root, "bin", "envtest")
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%s not found in %s: run `make toolchain` (it builds the test binaries once per machine)", b, dir)
		}
	}
	return dir, nil
}

var moduleDirs sync.Map

// moduleDir returns where the Go module cache holds a dependency, for the CRDs it ships.
func moduleDir(root, module string) (string, error) {
	if d, ok := moduleDirs.Load(module); ok {
		return d.(string), nil
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locate module %s: %w", module, err)
	}
	d := strings.TrimSpace(string(out))
	if d == "" {
		return "", fmt.Errorf("module %s is not downloaded: run `go mod download`", module)
	}
	moduleDirs.Store(module, d)
	return d, nil
}
