package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hack/cluster says that it builds bin/localcluster before a build that can take minutes, instead
// of compiling silently. A stand-in go on PATH keeps the test from building anything.
func TestWrapperSaysItBuilds(t *testing.T) {
	root := t.TempDir()
	script, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "hack", "cluster"))
	if err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string]string{
		"hack/cluster": string(script),
		"go.mod":       "module example.test\n",
		// go build -o <bin> ...: writes a program that says it ran.
		"fakebin/go": "#!/bin/sh\nwhile [ \"$1\" != -o ]; do shift; done\nmkdir -p \"$(dirname \"$2\")\"\nprintf '#!/bin/sh\\necho ran \"$@\"\\n' > \"$2\"\nchmod +x \"$2\"\n",
	} {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run := func() (string, string) {
		cmd := exec.Command("bash", filepath.Join(root, "hack", "cluster"), "status")
		cmd.Env = []string{"PATH=" + filepath.Join(root, "fakebin") + ":/usr/bin:/bin"}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		return string(out), stderr.String()
	}
	out, stderr := run()
	if !strings.Contains(stderr, "building bin/localcluster (the first build compiles client-go: a few minutes on 2 cores)") || out != "ran status\n" {
		t.Fatalf("first run: stdout %q, stderr %q", out, stderr)
	}
	if _, stderr := run(); stderr != "" {
		t.Fatalf("second run rebuilt or talked: %q", stderr)
	}
}
