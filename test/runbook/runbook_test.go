package runbook

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const sample = "# Do a thing\n\nOn the [quickstart](../quickstart.md), `my-cluster` is `demo` and\n`team-a` is `quickstart`.\n\n" +
	"```sh\nkubectl captf status my-cluster -n team-a\n```\n\n## 1. Look\n\n```text\nnot run\n```\n\n" +
	"```sh\n# a comment\nhash=$(kubectl captf plan show my-cluster -n team-a -o json | jq -r .planHash)\n" +
	"kubectl captf owners check my-cluster -n team-a   # exit 1: BROKEN lines\n" +
	"kubectl patch terraformcluster my-cluster -n team-a --type merge \\\n  -p '{}'\n```\n"

func TestParse(t *testing.T) {
	r, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	if r.Title != "Do a thing" || len(r.Sections) != 2 || r.Sections[1].Heading != "1. Look" {
		t.Fatalf("%+v", r)
	}
	if r.Quickstart["my-cluster"] != "demo" || r.Quickstart["team-a"] != "quickstart" || len(r.Quickstart) != 2 {
		t.Fatalf("quickstart: %v", r.Quickstart)
	}
	cs := r.Commands()
	if len(cs) != 4 || cs[0].Line != 7 || cs[1].Exit != 0 || cs[2].Exit != 1 || !strings.Contains(cs[3].Text, "\\\n  -p '{}'") || cs[3].Line != 20 {
		t.Fatalf("%+v", cs)
	}
}

func TestSubstitute(t *testing.T) {
	m := map[string]string{"my-cluster": "demo", "team-a": "quickstart", "target.kubeconfig": "/tmp/b/kubeconfig"}
	for in, want := range map[string]string{
		"kubectl captf status my-cluster -n team-a":                     "kubectl captf status demo -n quickstart",
		"kubectl scale md my-cluster-md-0 -n team-a":                    "kubectl scale md my-cluster-md-0 -n quickstart",
		"backups list tfc/my-cluster --to-kubeconfig target.kubeconfig": "backups list tfc/demo --to-kubeconfig /tmp/b/kubeconfig",
		"Cluster team-a/my-cluster; notmy-cluster":                      "Cluster quickstart/demo; notmy-cluster",
	} {
		if got := Substitute(in, m); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
	if got := Substitute("a b", map[string]string{"a": "a a"}); got != "a a b" {
		t.Errorf("a value is searched again: %q", got)
	}
}

func TestShellKeepsVariablesAndExitCodes(t *testing.T) {
	sh, err := StartShell(t.TempDir(), []string{"PATH=" + os.Getenv("PATH")})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	r, _ := Parse([]byte("# t\n\n```sh\nx=$(echo hello)\necho \"$x\" \\\n  world\nread -r line; echo \"read: $line\"\nfalse   # exit 1\nexit 3   # exit 3\n```\n"))
	steps, err := RunSection(sh, r.Sections[0], nil, 10*time.Second, io.Discard)
	if err == nil || len(steps) != 5 {
		t.Fatalf("%v %v", steps, err)
	}
	if steps[1].Output != "hello world" || steps[2].Output != "read: " || steps[3].Code != 1 || !steps[3].OK() {
		t.Fatalf("%+v", steps)
	}
	if steps[4].Err == nil || !strings.Contains(err.Error(), "the shell exited") {
		t.Fatalf("exit in a command: %v", err)
	}
}

func TestShellTimeout(t *testing.T) {
	sh, err := StartShell(t.TempDir(), []string{"PATH=" + os.Getenv("PATH")})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	if _, _, err := sh.Run("sleep 30", 200*time.Millisecond); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatal(err)
	}
}

// Every runbook of the repository reads (a title, commands), and the e2e suite runs each one:
// a runbook added without a suite that runs it fails here, in make test.
func TestEveryRunbookIsRun(t *testing.T) {
	rs, err := ReadAll("../../docs/runbooks")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) < 4 {
		t.Fatalf("%d runbooks", len(rs))
	}
	suites, err := filepath.Glob("../e2e/*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	for _, f := range suites {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "runRunbook(") {
				calls = append(calls, line)
			}
		}
	}
	for _, r := range rs {
		if r.Title == "" || len(r.Commands()) == 0 {
			t.Errorf("%s: no title or no commands", r.Path)
		}
		name := `"` + filepath.Base(r.Path) + `"`
		run := false
		for _, c := range calls {
			run = run || strings.Contains(c, name)
		}
		if !run {
			t.Errorf("%s: no e2e suite runs it (runRunbook(..., %s, ...) in test/e2e)", r.Path, name)
		}
	}
}
