// Package golden compares a test's output with a file kept under testdata, the one way every
// golden test in this repository does it.
//
// UPDATE_GOLDEN=1 rewrites the files instead of comparing (`make update-golden` sets it for
// every package with golden tests). It is an environment variable rather than a flag because
// `go test ./... -update` fails in every package that does not define the flag, while the
// environment reaches each test binary.
package golden

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Env is the environment variable that rewrites the golden files when it is 1.
const Env = "UPDATE_GOLDEN"

// Assert fails t unless got equals the file at path (relative to the test's package). With
// UPDATE_GOLDEN=1 it writes got to path first, creating its directory, and logs that it did.
func Assert(t testing.TB, path string, got []byte) {
	t.Helper()
	// Each Fatal is followed by return: a testing.TB need not stop the goroutine (this
	// package's own test records failures instead).
	update, err := updating(os.Getenv(Env))
	if err != nil {
		t.Fatal(err)
		return
	}
	if update {
		if err := write(path, got); err != nil {
			t.Fatalf("rewrite golden file: %v", err)
			return
		}
		t.Logf("rewrote %s (%s=1)", path, Env)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file: %v; create it with: %s", err, rewriteCommand(t))
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output (%s); if the change is intended, rewrite it with: %s\n--- got\n%s",
			path, firstDifference(got, want), rewriteCommand(t), got)
	}
}

// updating reads UPDATE_GOLDEN: unset or empty compares, 1 rewrites; anything else is refused
// rather than silently ignored.
func updating(v string) (bool, error) {
	switch v {
	case "":
		return false, nil
	case "1":
		return true, nil
	}
	return false, fmt.Errorf("%s=%q: set it to 1 to rewrite the golden files, or unset it to compare", Env, v)
}

// write writes b to path unless the file already holds exactly b (so a rewrite that changes
// nothing leaves the file alone).
func write(path string, b []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// firstDifference says where got first departs from want: the line number and both lines
// (quoted, so that trailing spaces and escape codes show), or which one is longer.
func firstDifference(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) && i < len(w); i++ {
		if g[i] != w[i] {
			return fmt.Sprintf("first difference at line %d: got %q, want %q", i+1, g[i], w[i])
		}
	}
	if len(g) > len(w) {
		return fmt.Sprintf("got %d more line(s) from line %d: %q", len(g)-len(w), len(w)+1, g[len(w)])
	}
	return fmt.Sprintf("got %d line(s) fewer, missing from line %d: %q", len(w)-len(g), len(g)+1, w[len(g)])
}

// rewriteCommand is the command that rewrites the golden file of this test alone.
func rewriteCommand(t testing.TB) string {
	pkg := "."
	if dir, err := os.Getwd(); err == nil {
		if root, ok := moduleRoot(dir); ok {
			if rel, err := filepath.Rel(root, dir); err == nil && rel != "." {
				pkg = "./" + filepath.ToSlash(rel)
			}
		}
	}
	return fmt.Sprintf("%s=1 go test %s -run '%s' -count=1", Env, pkg, runPattern(t.Name()))
}

// runPattern is the -run pattern that selects exactly the test (or subtest) called name.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

func moduleRoot(dir string) (string, bool) {
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}
