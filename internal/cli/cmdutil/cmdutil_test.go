package cmdutil

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/capx-io/capx/internal/scheme"
)

// panicFactory fails the test if any client is built.
func panicFactory(t *testing.T, streams *IOStreams) *Factory {
	f := NewFactory(streams, "kubectl test")
	f.RESTConfig = func() (*rest.Config, error) { t.Fatal("built a REST config"); return nil, nil }
	f.Client = func() (client.WithWatch, error) { t.Fatal("built a client"); return nil, nil }
	f.Kubernetes = func() (kubernetes.Interface, error) { t.Fatal("built a clientset"); return nil, nil }
	f.Namespace = func() (string, error) { t.Fatal("read the namespace"); return "", nil }
	return f
}

func TestHelpCompletionAndClientVersionBuildNoClient(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {}, {"version", "--client"}, {"version", "--client", "-o", "json"},
		{"completion", "bash"}, {"completion", "zsh"}, {"completion", "fish"}, {"completion", "powershell"},
		{"completion", "plugin"}, {"version", "--help"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			streams, _, out, _ := TestIOStreams(false)
			f := panicFactory(t, streams)
			root := NewRoot(f, "test plugin", "")
			root.AddCommand(NewCmdVersion(f, "kubectl-test", nil))
			if code := Execute(root, streams, args); code != ExitOK {
				t.Fatalf("exit %d", code)
			}
			if out.Len() == 0 {
				t.Fatal("no output")
			}
		})
	}
}

func TestRootUsesDisplayName(t *testing.T) {
	streams, _, out, _ := TestIOStreams(false)
	root := NewRoot(panicFactory(t, streams), "test plugin", "")
	Execute(root, streams, []string{"--help"})
	if !strings.Contains(out.String(), "kubectl test [flags]") || !strings.Contains(out.String(), "--kubeconfig") || !strings.Contains(out.String(), "--color") {
		t.Fatalf("help:\n%s", out)
	}
}

func TestExitCodes(t *testing.T) {
	streams, _, _, errOut := TestIOStreams(false)
	f := panicFactory(t, streams)
	root := NewRoot(f, "x", "")
	root.AddCommand(&cobra.Command{Use: "found", RunE: func(*cobra.Command, []string) error { return ErrFound }})
	root.AddCommand(&cobra.Command{Use: "fail", RunE: func(*cobra.Command, []string) error { return errors.New("boom") }})
	root.AddCommand(&cobra.Command{Use: "one", Args: ExactArgs(1), RunE: func(*cobra.Command, []string) error { return nil }})
	for _, tc := range []struct {
		args []string
		code ExitCode
		err  string
	}{
		{[]string{"found"}, ExitFound, ""},
		{[]string{"fail"}, ExitFailure, "Error: boom"},
		{[]string{"one"}, ExitUsage, "accepts 1 arg"},
		{[]string{"one", "--nope"}, ExitUsage, "unknown flag"},
		{[]string{"nope"}, ExitUsage, "unknown command"},
		{[]string{"--color", "purple"}, ExitUsage, "unknown colour mode"},
	} {
		errOut.Reset()
		if code := Execute(root, streams, tc.args); code != tc.code {
			t.Errorf("%v: exit %d, want %d (%s)", tc.args, code, tc.code, errOut)
		}
		if tc.err == "" && errOut.Len() > 0 || !strings.Contains(errOut.String(), tc.err) {
			t.Errorf("%v: stderr %q, want %q", tc.args, errOut, tc.err)
		}
	}
}

type thing struct {
	TypeMeta `json:",inline"`
	Name     string `json:"name"`
}

func TestPrint(t *testing.T) {
	obj := thing{Meta("Thing"), "a"}
	var b bytes.Buffer
	if err := Print(&b, JSON, obj, nil); err != nil {
		t.Fatal(err)
	}
	if b.String() != "{\n  \"apiVersion\": \"cli.capx.io/v1alpha1\",\n  \"kind\": \"Thing\",\n  \"name\": \"a\"\n}\n" {
		t.Fatalf("json: %q", b.String())
	}
	b.Reset()
	if err := Print(&b, YAML, obj, nil); err != nil {
		t.Fatal(err)
	}
	var back thing
	if err := yaml.Unmarshal(b.Bytes(), &back); err != nil || back != obj {
		t.Fatalf("yaml %q: %v %v", b.String(), back, err)
	}
	called := false
	if err := Print(&b, Text, obj, func() error { called = true; return nil }); err != nil || !called {
		t.Fatal("text not called")
	}
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	var f Format
	AddOutputFlag(cmd, &f, Text, JSON)
	if err := cmd.Flags().Set("output", "yaml"); err == nil {
		t.Fatal("yaml accepted where not allowed")
	}
	if err := cmd.Flags().Set("output", "JSON"); err != nil || f != JSON {
		t.Fatalf("%v %v", f, err)
	}
}

func TestColor(t *testing.T) {
	t.Setenv("CLICOLOR_FORCE", "0")
	for _, tc := range []struct {
		mode    ColorMode
		tty     bool
		noColor bool
		want    bool
	}{
		{ColorAuto, true, false, true},
		{ColorAuto, false, false, false},
		{ColorAuto, true, true, false},
		{ColorAlways, false, true, true},
		{ColorNever, true, false, false},
	} {
		if tc.noColor {
			t.Setenv("NO_COLOR", "1")
		} else {
			t.Setenv("NO_COLOR", "")
			_ = os.Unsetenv("NO_COLOR")
		}
		if got := tc.mode.Enabled(tc.tty); got != tc.want {
			t.Errorf("%s tty=%v NO_COLOR=%v: %v", tc.mode, tc.tty, tc.noColor, got)
		}
	}
	var b bytes.Buffer
	if s := NewStyles(&b, false).Bad("x"); s != "x" {
		t.Fatalf("colour off: %q", s)
	}
	if s := NewStyles(&b, true).Bad("x"); !strings.Contains(s, "\x1b[") {
		t.Fatalf("colour on: %q", s)
	}
}

func TestConfirm(t *testing.T) {
	for _, tc := range []struct {
		tty    bool
		yes    bool
		answer string
		code   ExitCode
	}{
		{false, true, "", ExitOK},
		{false, false, "y\n", ExitUsage},
		{true, false, "y\n", ExitOK},
		{true, false, "YES\n", ExitOK},
		{true, false, "n\n", ExitCancelled},
		{true, false, "", ExitCancelled},
	} {
		streams, in, _, errOut := TestIOStreams(tc.tty)
		in.WriteString(tc.answer)
		err := Confirm(streams, tc.yes, "Restore?")
		if CodeOf(err) != tc.code {
			t.Errorf("%+v: %v", tc, err)
		}
		if tc.tty && !tc.yes && !strings.Contains(errOut.String(), "Restore? [y/N]") {
			t.Errorf("no prompt: %q", errOut)
		}
	}
}

func TestVersionWithManager(t *testing.T) {
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "capx-system", Name: "capx-controller-manager",
			Labels: map[string]string{"app.kubernetes.io/name": "capx", "app.kubernetes.io/component": "manager"}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "manager", Image: "ghcr.io/capx-io/capx-manager:v9.1.0"}}}}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(dep).Build()
	streams, _, out, errOut := TestIOStreams(false)
	f := NewTestFactory(streams, "kubectl test", nil, c, nil, "default")
	root := NewRoot(f, "x", "")
	root.AddCommand(NewCmdVersion(f, "kubectl-test", nil))
	if code := Execute(root, streams, []string{"version", "-o", "json"}); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var v Version
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if v.Kind != "Version" || v.Manager == nil || v.Manager.Version != "v9.1.0" || len(v.Warnings) != 1 || !strings.Contains(v.Warnings[0], "skew") {
		t.Fatalf("%+v", v)
	}
	// A cluster without the manager is a warning, not a failure.
	out.Reset()
	empty := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	opts := &VersionOptions{IO: streams, Binary: "kubectl-test", Output: Text, ManagerNamespace: "capx-system", Timeout: 1e9,
		Client: func() (client.WithWatch, error) { return empty, nil }}
	if err := RunVersion(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), "Warning: manager version unknown") {
		t.Fatalf("stderr %q", errOut)
	}
}

func TestSkew(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		skew bool
	}{
		{"v0.1.0", "v0.1.5", false}, {"v0.1.0", "v0.2.0", true}, {"v0.0.0-dev", "dev", false}, {"v1.0.0", "v2.0.0-rc.1", true},
	} {
		if got := Skew(tc.a, tc.b) != ""; got != tc.skew {
			t.Errorf("%s %s: %v", tc.a, tc.b, got)
		}
	}
}

func TestCompletionShim(t *testing.T) {
	s := CompletionShim("kubectl captf")
	if !strings.HasPrefix(s, "#!/bin/sh\n") || !strings.Contains(s, `exec kubectl-captf __complete "$@"`) {
		t.Fatal(s)
	}
}
