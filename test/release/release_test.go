//go:build release

package release

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/capx-io/capx/hack/dist"
	"github.com/capx-io/capx/internal/testenv"
)

func TestMain(m *testing.M) {
	// envtest logs through controller-runtime, which complains once when no logger is set.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// snapshot is what make release-snapshot left in the checkout.
type snapshot struct {
	root, dist, bin string
	version         string
	// revision is the commit the snapshot was built from (its version's g<commit>), not HEAD:
	// in a shared checkout HEAD may have moved since.
	revision  string
	artifacts []dist.Artifact
}

func loadSnapshot(t *testing.T) *snapshot {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	s := &snapshot{root: root, dist: filepath.Join(root, "dist"), bin: filepath.Join(root, "bin")}
	if s.version, err = dist.Version(s.dist); err != nil {
		t.Fatal(err)
	}
	_, short, ok := strings.Cut(s.version, "-snapshot.g")
	if !ok {
		t.Fatalf("version %s is not a snapshot's (v<series>.0-snapshot.g<commit>)", s.version)
	}
	s.revision = strings.TrimSpace(run(t, nil, "git", "-C", root, "rev-parse", short+"^{commit}"))
	if s.artifacts, err = dist.Artifacts(s.dist); err != nil {
		t.Fatal(err)
	}
	// artifacts.json paths are relative to the root goreleaser ran in.
	for i, a := range s.artifacts {
		if !filepath.IsAbs(a.Path) {
			s.artifacts[i].Path = filepath.Join(root, a.Path)
		}
	}
	return s
}

// tool is a toolchain binary (hack/toolchain.sh release), or a failure naming how to build it.
func (s *snapshot) tool(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(s.bin, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s not found in %s: run make release-tools (builds it once per machine)", name, s.bin)
	}
	return p
}

// plugin returns the kubectl plugin's binary name, skipping the test while its command does not
// exist in the tree yet (the release then has no archives for it).
func (s *snapshot) plugin(t *testing.T, name string) string {
	t.Helper()
	bin := "kubectl-" + name
	if _, err := os.Stat(filepath.Join(s.root, "cmd", bin, "main.go")); err != nil {
		t.Skipf("cmd/%s does not exist yet, so the release has no %s plugin to prove", bin, name)
	}
	return bin
}

// hostArchive is the archive of a build for the machine the test runs on.
func (s *snapshot) hostArchive(t *testing.T, id string) dist.Artifact {
	t.Helper()
	for _, a := range dist.Filter(s.artifacts, dist.Archive, id) {
		if a.Goos == runtime.GOOS && a.Goarch == runtime.GOARCH {
			return a
		}
	}
	t.Fatalf("dist/artifacts.json has no %s archive for %s/%s: rerun make release-snapshot", id, runtime.GOOS, runtime.GOARCH)
	return dist.Artifact{}
}

// isolatedKubectl links kubectl alone into a fresh folder, so that a PATH naming that folder
// finds no plugin but the ones a test puts there (bin/ also holds make build's plugins).
func (s *snapshot) isolatedKubectl(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	link := filepath.Join(dir, "kubectl")
	if err := os.Symlink(s.tool(t, "kubectl"), link); err != nil {
		t.Fatal(err)
	}
	return link
}

// run runs a command with a bounded time and returns its combined output.
func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	out, err := runErr(t, env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return out
}

func runErr(t *testing.T, env []string, name string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := command(env, &out, &out, name, args...)
	return out.String(), err
}

// runStdout runs a command and returns its stdout alone (kubectl's completion writes debug lines
// to stderr).
func runStdout(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := command(env, &stdout, &stderr, name, args...); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func command(env []string, stdout, stderr io.Writer, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	return cmd.Run()
}
