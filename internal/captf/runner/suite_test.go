package runner_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/runner"
	"github.com/capx-io/capx/internal/captf/runresult"
	"github.com/capx-io/capx/internal/testenv"
)

var (
	env     *testenv.Env
	tofuBin string
)

// TestMain starts one API server for the package. The runner tests need the OpenTofu that
// hack/toolchain.sh builds; without it they fail rather than skip, so a missing toolchain is
// never mistaken for passing tests.
func TestMain(m *testing.M) {
	// Fuzzing (hack/fuzz.sh: -run '^$' -fuzz FuzzRedact) runs only the redactor, which needs
	// neither OpenTofu nor an API server; every fuzz worker would otherwise start its own.
	flag.Parse()
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" ||
		flag.Lookup("test.fuzz").Value.String() != "" && flag.Lookup("test.run").Value.String() == "^$" {
		os.Exit(m.Run())
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tofuBin = filepath.Join(root, "bin", "tofu")
	if _, err := os.Stat(tofuBin); err != nil {
		fmt.Fprintf(os.Stderr, "runner tests: %s is missing: run `make toolchain` (it builds OpenTofu once per machine)\n", tofuBin)
		os.Exit(1)
	}
	os.Exit(testenv.Run(m, testenv.Options{}, &env))
}

// fixture is the file layout of one Job pod in a temp dir: module/ beside work/ (the root's
// module source is ../../module from work/root), config/ (the per-run Secret) and creds/; plus a
// namespace on the test API server for the state.
type fixture struct {
	t       *testing.T
	dir     string
	ns      string
	kind    string
	suffix  string
	vars    map[string]any // terraform.tfvars.json, written before every run
	environ []string       // the runner's environment
	runs    atomic.Int32
}

var roleKinds = map[string]string{
	"cluster": captfv1.KindCluster, "machine": captfv1.KindMachine, "machinepool": captfv1.KindMachinePool,
	"leaky": captfv1.KindMachine,
}

// newFixture lays out a Job for a role: the module from test/modules/<role> (or
// testdata/modules/<role>) and the rendered root from testdata/roots/<role>.
func newFixture(t *testing.T, role string) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), ns: env.NewNamespace(t), kind: roleKinds[role]}
	f.suffix = contract.StateSuffix(f.ns, f.kind, "obj0")
	moduleSrc := filepath.Join(env.Root, "test", "modules", role)
	if _, err := os.Stat(moduleSrc); err != nil {
		moduleSrc = filepath.Join("testdata", "modules", role)
	}
	copyDir(t, moduleSrc, filepath.Join(f.dir, "module"))
	for _, d := range []string{"config", "creds"} {
		must(t, os.MkdirAll(filepath.Join(f.dir, d), 0o755))
	}
	root := filepath.Join("testdata", "roots", role)
	copyFile(t, filepath.Join(root, contract.RootModuleFile), filepath.Join(f.dir, "config", contract.RootModuleFile))
	b, err := os.ReadFile(filepath.Join(root, contract.VarsFile))
	must(t, err)
	must(t, json.Unmarshal(b, &f.vars))
	if _, ok := f.vars["captf_object"]; ok {
		f.vars["captf_object"] = map[string]any{"kind": f.kind, "name": "obj0", "namespace": f.ns}
	}
	// User TF_* and KUBE_* variables must not reach the runtime: TF_CLI_ARGS would break
	// every command, KUBE_NAMESPACE would move the state.
	f.environ = []string{"PATH=" + os.Getenv("PATH"), "TF_CLI_ARGS=-no-such-flag", "KUBE_NAMESPACE=elsewhere",
		"TF_LOG=trace"}
	return f
}

// args are the flags the controller passes, with the test's kubeconfig instead of the pod's
// service account.
func (f *fixture) args(op, resultFile string, extra ...string) []string {
	a := []string{
		"run", "--result-file=" + resultFile, "--op=" + op,
		"--bin=" + tofuBin,
		"--module=" + filepath.Join(f.dir, "module"),
		"--workdir=" + filepath.Join(f.dir, "work"),
		"--config=" + filepath.Join(f.dir, "config"),
		"--credentials=" + filepath.Join(f.dir, "creds"),
		"--providers=" + filepath.Join(f.dir, "providers"),
		"--lock-timeout=2s", "--stop-timeout=30s",
		"--backend-config=config_path=" + env.KubeconfigPath,
		"--backend-config=namespace=" + f.ns,
		"--backend-config=secret_suffix=" + f.suffix,
		`--backend-config=labels={"captf.io/managed"="true","clusterctl.cluster.x-k8s.io/move"=""}`,
	}
	return append(a, extra...)
}

// prepareRun gives the run a fresh work directory (a new pod's emptyDir), writes the inputs
// and returns where the result goes.
func (f *fixture) prepareRun() string {
	f.t.Helper()
	must(f.t, os.RemoveAll(filepath.Join(f.dir, "work")))
	b, err := json.Marshal(f.vars)
	must(f.t, err)
	must(f.t, os.WriteFile(filepath.Join(f.dir, "config", contract.VarsFile), b, 0o644))
	return filepath.Join(f.dir, fmt.Sprintf("result-%d.json", f.runs.Add(1)))
}

// outcome is what one runner invocation left behind.
type outcome struct {
	res  runresult.Result
	raw  string // the result file
	log  string // the pod log
	code int
}

// run runs the runner in-process, as `manager runner run` does.
func (f *fixture) run(ctx context.Context, op string, extra ...string) outcome {
	f.t.Helper()
	resultFile := f.prepareRun()
	var out bytes.Buffer
	cmd := runner.NewCommand(runner.IO{Out: &out, Environ: func() []string { return f.environ }})
	cmd.SetArgs(f.args(op, resultFile, extra...))
	code := runner.ExitCode(cmd.ExecuteContext(ctx))
	return f.outcome(resultFile, out.String(), code)
}

func (f *fixture) outcome(resultFile, log string, code int) outcome {
	f.t.Helper()
	raw, err := os.ReadFile(resultFile)
	if err != nil {
		f.t.Fatalf("no result file: %v\nlog:\n%s", err, log)
	}
	res, err := runresult.Decode(raw)
	if err != nil {
		f.t.Fatalf("decode result: %v\n%s", err, raw)
	}
	if (code == 0) != res.OK() {
		f.t.Fatalf("exit code %d disagrees with result %s", code, raw)
	}
	return outcome{res: res, raw: string(raw), log: log, code: code}
}

// ok fails the test unless the run succeeded.
func (o outcome) ok(t *testing.T) outcome {
	t.Helper()
	if o.code != 0 {
		t.Fatalf("runner failed (exit %d): %s\nlog:\n%s", o.code, o.raw, o.log)
	}
	return o
}

func (o outcome) stepNames() []string {
	var n []string
	for _, s := range o.res.Steps {
		n = append(n, s.Name)
	}
	return n
}

var (
	buildOnce sync.Once
	runnerBin string
	buildErr  error
)

// runnerBinary builds cmd/captf-runner once, for the tests that signal or kill a real process.
func runnerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "captf-runner-")
		if err != nil {
			buildErr = err
			return
		}
		runnerBin = filepath.Join(dir, "captf-runner")
		cmd := exec.Command("go", "build", "-o", runnerBin, "./cmd/captf-runner")
		cmd.Dir = env.Root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/captf-runner: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return runnerBin
}

// start runs the runner binary as a child process; its log streams into the returned buffer.
func (f *fixture) start(op string, extra ...string) (*exec.Cmd, *lockedBuffer, string) {
	f.t.Helper()
	resultFile := f.prepareRun()
	cmd := exec.Command(runnerBinary(f.t), f.args(op, resultFile, extra...)...)
	cmd.Env = f.environ
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	must(f.t, cmd.Start())
	f.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, out, resultFile
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stateSecret returns the base state Secret, or nil when there is none.
func (f *fixture) stateSecret(ctx context.Context) *corev1.Secret {
	f.t.Helper()
	s := &corev1.Secret{}
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: contract.StateSecretName(f.suffix)}, s)
	if err != nil {
		return nil
	}
	return s
}

// state decodes the state JSON from the state Secret.
func (f *fixture) state(ctx context.Context) map[string]any {
	f.t.Helper()
	s := f.stateSecret(ctx)
	if s == nil {
		f.t.Fatalf("state Secret %s not found", contract.StateSecretName(f.suffix))
	}
	return decodeState(f.t, s.Data[contract.BackendStateKey])
}

func decodeState(t *testing.T, gz []byte) map[string]any {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	must(t, err)
	b, err := io.ReadAll(zr)
	must(t, err)
	var st map[string]any
	must(t, json.Unmarshal(b, &st))
	return st
}

// lockHolder returns the state lock's holder ID, "" when the state is not locked.
func (f *fixture) lockHolder(ctx context.Context) string {
	l := &coordinationv1.Lease{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: contract.LockLeaseName(f.suffix)}, l); err != nil {
		return ""
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	must(t, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		copyFile(t, p, filepath.Join(dst, rel))
		return nil
	}))
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	must(t, err)
	must(t, os.WriteFile(dst, b, 0o644))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
