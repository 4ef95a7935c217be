package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheck: a command that uses a function only its linux file declares type-checks for
// linux and fails for darwin, naming the platform and the missing symbol.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"go.mod":            "module example.com/cc\n\ngo 1.22\n",
		"cmd/tool/main.go":  "package main\n\nfunc main() { platformOnly() }\n",
		"cmd/tool/linux.go": "//go:build linux\n\npackage main\n\nfunc platformOnly() {}\n",
		"lib/lib.go":        "package lib\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := check(dir, "linux/arm64", []string{"./cmd/tool"}); err != nil || n == 0 {
		t.Errorf("linux/arm64: %d packages, %v; want it to pass", n, err)
	}
	_, err := check(dir, "darwin/amd64", []string{"./cmd/tool"})
	if err == nil || !strings.Contains(err.Error(), "darwin/amd64") || !strings.Contains(err.Error(), "platformOnly") {
		t.Errorf("darwin/amd64: %v; want a failure naming the platform and platformOnly", err)
	}
	if _, err := check(dir, "linux/amd64", []string{"./lib"}); err == nil || !strings.Contains(err.Error(), "not a command") {
		t.Errorf("a library as main: %v; want 'not a command'", err)
	}
}

func TestReadTargets(t *testing.T) {
	p := filepath.Join(t.TempDir(), "goreleaser.yaml")
	config := `builds:
- id: a
  main: ./cmd/a
  goos: [linux, windows]
  goarch: [amd64, arm64]
- id: b
  main: ./cmd/b
  goos: [linux]
  goarch: [amd64]
`
	if err := os.WriteFile(p, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readTargets(p, []string{"linux/amd64"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"linux/arm64": "./cmd/a", "windows/amd64": "./cmd/a", "windows/arm64": "./cmd/a"}
	if len(got) != len(want) {
		t.Errorf("targets %v, want %v", got, want)
	}
	for k, v := range want {
		if strings.Join(got[k], " ") != v {
			t.Errorf("%s: %v, want %s", k, got[k], v)
		}
	}
	if _, err := readTargets(p, []string{"linux/amd64", "linux/arm64", "windows/amd64", "windows/arm64"}); err == nil {
		t.Error("everything skipped: no error")
	}
}
