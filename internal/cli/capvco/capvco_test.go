package capvco_test

import (
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/cli/capvco"
	"github.com/capx-io/capx/internal/cli/capvco/gpucheck"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// noClients fails the test if a command builds any client.
func noClients(t *testing.T, f *cmdutil.Factory) *cmdutil.Factory {
	f.RESTConfig = func() (*rest.Config, error) { t.Fatal("built a REST config"); return nil, nil }
	f.Client = func() (client.WithWatch, error) { t.Fatal("built a client"); return nil, nil }
	f.Kubernetes = func() (kubernetes.Interface, error) { t.Fatal("built a clientset"); return nil, nil }
	f.Namespace = func() (string, error) { t.Fatal("read the namespace"); return "", nil }
	return f
}

// TestNoClusterForHelpCompletionVersion: --help of every command, completion and version
// --client never read a kubeconfig or contact a cluster, in both binaries.
func TestNoClusterForHelpCompletionVersion(t *testing.T) {
	for _, bin := range []string{"kubectl capvco", gpucheck.StandaloneName} {
		args := [][]string{{"--help"}, {"version", "--client"}, {"version", "--client", "-o", "json"}, {"completion", "bash"}, {"completion", "zsh"}}
		if bin == "kubectl capvco" {
			args = append(args, []string{"completion", "plugin"}, []string{"gpucheck", "--help"}, []string{"gpucheck", "orphans", "--help"},
				[]string{"gpucheck", "release", "--help"}, []string{"status", "--help"}, []string{"adoption", "--help"},
				[]string{"move", "preflight", "--help"}, []string{"move", "register-inventory", "--help"})
		} else {
			args = append(args, []string{"release", "--help"}, []string{"-help"})
		}
		for _, a := range args {
			t.Run(bin+" "+strings.Join(a, " "), func(t *testing.T) {
				streams, _, out, errOut := cmdutil.TestIOStreams(false)
				f := noClients(t, cmdutil.NewFactory(streams, bin))
				root := capvco.NewRoot(f)
				if bin != "kubectl capvco" {
					root = gpucheck.NewStandalone(f)
				}
				if code := cmdutil.Execute(root, streams, gpucheck.NormalizeArgs(root, a)); code != cmdutil.ExitOK {
					t.Fatalf("exit %d: %s", code, errOut)
				}
				if out.Len() == 0 {
					t.Fatal("no output")
				}
				if a[0] == "completion" && a[1] == "plugin" && !strings.HasPrefix(out.String(), "#!/bin/sh") {
					t.Fatalf("not the kubectl_complete-capvco shim:\n%s", out)
				}
			})
		}
	}
}

// TestBadFlagsExitThree: usage errors exit 3 and name the help command.
func TestBadFlagsExitThree(t *testing.T) {
	for _, a := range [][]string{{"gpucheck", "orphans", "--ownership", "sometimes"}, {"gpucheck", "orphans", "-o", "xml"}, {"status", "a", "b"}, {"nosuch"}} {
		streams, _, _, errOut := cmdutil.TestIOStreams(false)
		f := noClients(t, cmdutil.NewFactory(streams, "kubectl capvco"))
		if code := cmdutil.Execute(capvco.NewRoot(f), streams, a); code != cmdutil.ExitUsage {
			t.Errorf("%v: exit %d, want 3: %s", a, code, errOut)
		}
	}
}
