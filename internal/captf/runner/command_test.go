package runner_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capx-io/capx/internal/captf/runner"
	"github.com/capx-io/capx/internal/captf/runresult"
)

// layout is a Job layout without an API server, for checks that fail before init.
func layout(t *testing.T) (dir string, args func(extra ...string) []string) {
	dir = t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "module"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "module", "main.tf"), []byte("# empty\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(dir, "config"), 0o755))
	return dir, func(extra ...string) []string {
		return append([]string{"run", "--result-file=" + filepath.Join(dir, "result.json"), "--bin=" + tofuBin,
			"--module=" + filepath.Join(dir, "module"), "--workdir=" + filepath.Join(dir, "work"),
			"--config=" + filepath.Join(dir, "config")}, extra...)
	}
}

func runCmd(t *testing.T, argv []string) (int, string) {
	var out bytes.Buffer
	cmd := runner.NewCommand(runner.IO{Out: &out, Environ: func() []string { return nil }})
	cmd.SetArgs(argv)
	return runner.ExitCode(cmd.ExecuteContext(context.Background())), out.String()
}

func readResult(t *testing.T, path string) runresult.Result {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	res, err := runresult.Decode(b)
	must(t, err)
	return res
}

func TestUsageErrorsWriteAResult(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--op=apply", "--bogus"}, "unknown flag: --bogus"},
		{"bad value", []string{"--op=apply", "--restore-chunks=many"}, "invalid argument"},
		{"no op", nil, "--op is required"},
		{"unknown op", []string{"--op=explode"}, `--op="explode" is not one of`},
		{"arguments", []string{"--op=plan", "extra"}, "unexpected arguments"},
		{"expected plan on destroy", []string{"--op=destroy", "--expect-plan=p2:x"}, "apply only to --op=apply"},
		{"saved plan without approval", []string{"--op=apply", "--saved-plan-chunks=1", "--saved-plan-digest=ab"}, "--saved-plan-chunks needs --expect-plan"},
		{"saved plan without digest", []string{"--op=apply", "--saved-plan-chunks=1", "--expect-plan=p2:x"}, "--saved-plan-chunks needs --expect-plan"},
		{"too many saved plan chunks", []string{"--op=apply", "--saved-plan-chunks=17"}, "--saved-plan-chunks must be between 0 and 16"},
		{"dropped guard flag", []string{"--op=apply", "--guard-deletes"}, "unknown flag: --guard-deletes"},
		{"restore without chunks", []string{"--op=restore"}, "--restore-chunks between 1 and 32"},
		{"backend config", []string{"--op=apply", "--backend-config=novalue"}, "is not key=value"},
		{"module elsewhere", []string{"--op=apply", "--module=/somewhere/else"}, "root module in <workdir>/root calls source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			dir, args := layout(t)
			code, log := runCmd(t, args(tc.args...))
			g.Expect(code).To(Equal(runner.ExitUsage))
			g.Expect(log).To(ContainSubstring(tc.want))
			res := readResult(t, filepath.Join(dir, "result.json"))
			g.Expect(res.Error.Kind).To(Equal(runresult.KindUsage))
			g.Expect(res.Error.Summary).To(ContainSubstring(tc.want))
		})
	}
}

func TestResultFileAfterABadFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, _ := runCmd(t, []string{"run", "--nope", "--result-file", filepath.Join(dir, "r.json")})
	NewWithT(t).Expect(code).To(Equal(runner.ExitUsage))
	NewWithT(t).Expect(readResult(t, filepath.Join(dir, "r.json")).Error.Summary).To(Equal("unknown flag: --nope"))
}

func TestImageLayout(t *testing.T) {
	t.Parallel()
	t.Run("no module files", func(t *testing.T) {
		g := NewWithT(t)
		dir, args := layout(t)
		must(t, os.Remove(filepath.Join(dir, "module", "main.tf")))
		must(t, os.Mkdir(filepath.Join(dir, "module", "sub.tf"), 0o755)) // a directory does not count
		code, _ := runCmd(t, args("--op=apply"))
		g.Expect(code).To(Equal(runner.ExitFailed))
		res := readResult(t, filepath.Join(dir, "result.json"))
		g.Expect(res.Error.Kind).To(Equal(runresult.KindImageLayout))
		g.Expect(res.Error.Summary).To(ContainSubstring("has no .tf, .tf.json, .tofu or .tofu.json file"))
	})
	t.Run("runtime not executable", func(t *testing.T) {
		g := NewWithT(t)
		dir, args := layout(t)
		fake := filepath.Join(dir, "runtime")
		must(t, os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o644))
		code, _ := runCmd(t, args("--op=apply", "--bin="+fake))
		g.Expect(code).To(Equal(runner.ExitFailed))
		res := readResult(t, filepath.Join(dir, "result.json"))
		g.Expect(res.Error.Kind).To(Equal(runresult.KindImageLayout))
		g.Expect(res.Error.Summary).To(ContainSubstring("is not an executable file"))
	})
	t.Run("runtime that is no runtime", func(t *testing.T) {
		g := NewWithT(t)
		dir, args := layout(t)
		must(t, os.WriteFile(filepath.Join(dir, "config", "main.tf.json"), []byte(`{}`), 0o644))
		must(t, os.WriteFile(filepath.Join(dir, "config", "terraform.tfvars.json"), []byte(`{}`), 0o644))
		code, _ := runCmd(t, args("--op=apply", "--bin=/bin/false"))
		g.Expect(code).To(Equal(runner.ExitFailed))
		res := readResult(t, filepath.Join(dir, "result.json"))
		g.Expect(res.Error.Kind).To(Equal(runresult.KindImageLayout))
		g.Expect(res.Error.Step).To(Equal("version"))
	})
}

func TestCopy(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	dest := filepath.Join(t.TempDir(), "runner")
	code, _ := runCmd(t, []string{"copy", dest})
	g.Expect(code).To(Equal(runner.ExitOK))
	self, err := os.Executable()
	must(t, err)
	want, err := os.Stat(self)
	must(t, err)
	got, err := os.Stat(dest)
	must(t, err)
	g.Expect(got.Size()).To(Equal(want.Size()))
	g.Expect(got.Mode().Perm()).To(Equal(os.FileMode(0o755)))
}
