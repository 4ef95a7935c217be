// Package toolchaintest proves that hack/toolchain.sh gives back the kernel setting it changes
// while compiling (transparent huge pages, hack/hugepages.sh) on every way out: a build that
// succeeds, one that fails, and SIGINT, SIGTERM or SIGHUP in the middle of a compile.
//
// The script runs for real, with two stand-ins: CAPX_THP_FILE is a temporary file in the sysfs
// file's format, and a `go` early on PATH answers `go list` with nothing and, for `go build`,
// either writes the binaries, fails, or blocks until it is killed, so a signal always lands
// mid-compile.
package toolchaintest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeGo stands in for the go command; FAKE_GO_BUILD says what `go build` does.
const fakeGo = `#!/usr/bin/env bash
case "$1" in
build)
  echo "$$" >"$FAKE_GO_DIR/build.pid"
  case "$FAKE_GO_BUILD" in
  fail) echo "compile error" >&2; exit 1 ;;
  block) exec sleep 600 ;;
  esac
  out=""; prev=""
  for a in "$@"; do
    if [[ $prev == -o ]]; then out=$a; fi
    prev=$a
  done
  for a in "$@"; do
    case "$a" in */*) [[ $a == "$out" ]] || { printf '#!/bin/sh\n' >"$out${a##*/}"; chmod +x "$out${a##*/}"; } ;; esac
  done ;;
*) exit 0 ;;
esac
`

func TestHugePagesRestored(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		build  string
		signal syscall.Signal
		rc     int
	}{
		{"build succeeds", "ok", 0, 0},
		{"build fails", "fail", 0, 1},
		{"SIGINT", "block", syscall.SIGINT, 130},
		{"SIGTERM", "block", syscall.SIGTERM, 143},
		{"SIGHUP", "block", syscall.SIGHUP, 129},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			fakeBin := filepath.Join(dir, "fakebin")
			if err := os.MkdirAll(fakeBin, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(fakeBin, "go"), []byte(fakeGo), 0o755); err != nil {
				t.Fatal(err)
			}
			thp := filepath.Join(dir, "enabled")
			if err := os.WriteFile(thp, []byte("always [madvise] never\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			// A copy of the script in a scratch checkout, so that bin/ links land there.
			clone := filepath.Join(dir, "clone")
			for _, f := range []string{"toolchain.sh", "hugepages.sh", "versions.env"} {
				b, err := os.ReadFile(filepath.Join(root, "hack", f))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(filepath.Join(clone, "hack"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(clone, "hack", f), b, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("bash", filepath.Join(clone, "hack", "toolchain.sh"), "controller-gen")
			cmd.Env = append(os.Environ(),
				"PATH="+fakeBin+string(os.PathListSeparator)+os.Getenv("PATH"),
				"CAPX_CACHE="+filepath.Join(dir, "cache"), "CAPX_THP_FILE="+thp, "CAPX_BUILD_THP=1",
				"FAKE_GO_DIR="+dir, "FAKE_GO_BUILD="+c.build)
			// A file, not a pipe: Wait would also wait for whatever still holds a pipe open (the
			// progress ticker's sleep outlives the script by up to 30 s).
			log, err := os.Create(filepath.Join(dir, "out.log"))
			if err != nil {
				t.Fatal(err)
			}
			defer log.Close()
			cmd.Stdout, cmd.Stderr = log, log
			out := logFile(log.Name())
			// Its own process group: the signal goes to the script alone, as `kill PID` does.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
			if c.signal != 0 {
				buildPID := waitFor(t, filepath.Join(dir, "build.pid"))
				if got := readTHP(t, thp); got != "always" {
					t.Fatalf("during the build the setting is %q, want always:\n%s", got, out.String())
				}
				if err := cmd.Process.Signal(c.signal); err != nil {
					t.Fatal(err)
				}
				defer func() {
					// The script's cleanup stops the compile it started.
					if !gone(buildPID) {
						t.Errorf("the go build (pid %d) still runs after the script exited", buildPID)
					}
				}()
			}
			err = cmd.Wait()
			rc := 0
			if ee, ok := err.(*exec.ExitError); ok {
				rc = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if rc != c.rc {
				t.Errorf("exit code %d, want %d:\n%s", rc, c.rc, out.String())
			}
			if got := readTHP(t, thp); got != "madvise" {
				t.Errorf("after the script the setting is %q, want madvise back:\n%s", got, out.String())
			}
			if c.build == "ok" && !strings.Contains(out.String(), "ready: controller-gen") {
				t.Errorf("the build did not finish:\n%s", out.String())
			}
		})
	}
}

// TestHugePagesLeftAloneWhenAsked: CAPX_BUILD_THP=0, or a setting other than madvise, is never
// touched.
func TestHugePagesLeftAloneWhenAsked(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ env, before string }{
		{"CAPX_BUILD_THP=0", "always [madvise] never\n"},
		{"CAPX_BUILD_THP=1", "[always] madvise never\n"},
		{"CAPX_BUILD_THP=1", "always madvise [never]\n"},
	} {
		thp := filepath.Join(t.TempDir(), "enabled")
		if err := os.WriteFile(thp, []byte(c.before), 0o644); err != nil {
			t.Fatal(err)
		}
		script := fmt.Sprintf("source %q; huge_pages_for_build; cat %q; restore_huge_pages", filepath.Join(root, "hack", "hugepages.sh"), thp)
		cmd := exec.Command("bash", "-c", script)
		cmd.Env = append(os.Environ(), c.env, "CAPX_THP_FILE="+thp)
		got, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, got)
		}
		after, err := os.ReadFile(thp)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.before || string(after) != c.before {
			t.Errorf("%s with %q: the build saw %q, left %q; want it untouched", c.env, c.before, got, after)
		}
	}
}

func waitFor(t *testing.T, pidFile string) int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(pidFile); err == nil && len(bytes.TrimSpace(b)) > 0 {
			var pid int
			if _, err := fmt.Sscan(string(b), &pid); err == nil {
				return pid
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the script never started go build (%s)", pidFile)
	return 0
}

func readTHP(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// logFile shows the script's output in failures.
type logFile string

func (l logFile) String() string { b, _ := os.ReadFile(string(l)); return string(b) }

// gone waits for a killed process to end: a signal is delivered, not waited for.
func gone(pid int) bool {
	for range 600 {
		if !alive(pid) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// alive reports a process that exists and is not a zombie (an orphan waiting for its reaper).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
