package cmdutil

import (
	"strings"
	"testing"
)

func TestCompletionUnknownShellIsUsage(t *testing.T) {
	streams, _, out, errOut := TestIOStreams(false)
	root := NewRoot(panicFactory(t, streams), "test plugin", "")
	if code := Execute(root, streams, []string{"completion", "nosuchshell"}); code != ExitUsage {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut.String(), `unknown shell "nosuchshell": use bash, fish, plugin, powershell, zsh`) {
		t.Fatalf("stderr: %s", errOut)
	}
	out.Reset()
	if code := Execute(root, streams, []string{"completion"}); code != ExitOK || !strings.Contains(out.String(), "Available Commands") {
		t.Fatalf("completion alone: exit %d\n%s", code, out)
	}
}
