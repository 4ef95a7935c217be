package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capx-io/capx/internal/captf/runner"
	"github.com/capx-io/capx/internal/captf/runresult"
)

// TestInterruptedApplyKeepsState stops a real runner process with SIGTERM in the middle of an
// apply, as the kubelet does when a Job's pod is deleted: the runtime is interrupted, saves
// the state and releases the lock; the result says interrupted; the next apply carries on.
func TestInterruptedApplyKeepsState(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, "machine")
	f.vars["slow"] = 120

	cmd, out, resultFile := f.start("apply")
	g.Eventually(out.String, time.Minute, 100*time.Millisecond).Should(ContainSubstring("terraform_data.slow[0]: Creating..."))
	g.Expect(f.lockHolder(ctx)).NotTo(BeEmpty())

	stopped := time.Now()
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	_ = cmd.Wait()
	g.Expect(time.Since(stopped)).To(BeNumerically("<", 30*time.Second), "the runner stops within --stop-timeout")
	o := f.outcome(resultFile, out.String(), cmd.ProcessState.ExitCode())
	g.Expect(o.code).To(Equal(runner.ExitFailed))
	g.Expect(o.res.Error.Kind).To(Equal(runresult.KindInterrupted), o.log)
	g.Expect(o.res.Error.Step).To(Equal("apply"))
	g.Expect(o.res.Error.Summary).NotTo(ContainSubstring("did not stop"), "the runtime stopped by itself")

	g.Expect(f.lockHolder(ctx)).To(BeEmpty(), "the interrupted runtime released the state lock")
	g.Expect(resourceNames(f.state(ctx))).To(ContainElement("instance"), "what was created before the stop is in the state")

	// Dropping the interrupted resource deletes it, which needs an approval like any delete.
	f.vars["slow"] = 0
	blocked := f.run(ctx, "apply", f.object(ctx, "captf-m-obj0-apply-a2-000000")...)
	g.Expect(blocked.res.Error.Kind).To(Equal(runresult.KindBlocked), blocked.raw)
	a := f.approve(ctx, "captf-m-obj0-apply-a2-000000", "")
	next := f.run(ctx, "apply", append(f.object(ctx, "captf-m-obj0-apply-a3-000000"), a.flags()...)...).ok(t)
	g.Expect(next.res.Changes.Add).To(BeZero(), "the instance is not created twice")
}

// TestStaleLockForceUnlock: a runner killed outright (SIGKILL, OOM) leaves the state locked;
// the next Job is told the stale lock's ID and removes it after init.
func TestStaleLockForceUnlock(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, "machine")
	f.vars["slow"] = 30

	cmd, out, _ := f.start("apply")
	g.Eventually(out.String, time.Minute, 100*time.Millisecond).Should(ContainSubstring("terraform_data.slow[0]: Creating..."))
	lockID := f.lockHolder(ctx)
	g.Expect(lockID).NotTo(BeEmpty())
	must(t, cmd.Process.Kill()) // the runtime dies with it (parent-death signal)
	_ = cmd.Wait()
	g.Consistently(func() string { return f.lockHolder(ctx) }, 2*time.Second).Should(Equal(lockID))

	f.vars["slow"] = 0
	locked := f.run(ctx, "apply")
	g.Expect(locked.res.Error.Kind).To(Equal(runresult.KindStep))
	g.Expect(locked.res.Error.Summary).To(ContainSubstring("Error acquiring the state lock"))

	unlocked := f.run(ctx, "apply", "--force-unlock="+lockID).ok(t)
	g.Expect(unlocked.stepNames()).To(Equal([]string{"init", "force-unlock", "validate", "plan", "show", "apply"}))
	g.Expect(f.lockHolder(ctx)).To(BeEmpty())

	// The controller's information may be stale: a lock that is gone is not an error.
	gone := f.run(ctx, "plan", "--force-unlock="+lockID).ok(t)
	g.Expect(gone.res.Steps[1].Name).To(Equal("force-unlock"))
	g.Expect(gone.res.Steps[1].ExitCode).To(Equal(1))
}

// TestRedaction runs a module that prints every kind of secret the runner knows about.
func TestRedaction(t *testing.T) {
	t.Parallel()
	const (
		cred  = "cred-from-the-mirror-5b1e"
		token = "heuristic-api-token-0c77"
	)
	secrets := []string{cred, token, "Ym9vdHN0cmFwLXNlY3JldC12YWx1ZS05ODc2", "bootstrap-secret-value-9876",
		"module-internal-secret-7f3a9c2e"}
	leaky := func(t *testing.T) *fixture {
		f := newFixture(t, "leaky")
		credFile := filepath.Join(f.dir, "creds", "CAPX_CRED")
		must(t, os.WriteFile(credFile, []byte(cred+"\n"), 0o440))
		f.environ = append(f.environ, "CAPX_CRED="+cred, "MY_API_TOKEN="+token)
		f.vars["token_file"] = credFile
		return f
	}
	clean := func(t *testing.T, o outcome, secrets ...string) {
		g := NewWithT(t)
		for _, s := range secrets {
			g.Expect(o.log).NotTo(ContainSubstring(s))
			g.Expect(o.raw).NotTo(ContainSubstring(s))
		}
	}

	t.Run("log", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		f := leaky(t)
		// Every apply plans first, so the runner learns the values the plan marks sensitive
		// before applying.
		o := f.run(context.Background(), "apply", "--inputs-hash=h2:x").ok(t)
		clean(t, o, secrets...)
		for _, line := range []string{"env=", "heuristic=", "file=", "boot=", "decoded=", "internal="} {
			g.Expect(o.log).To(ContainSubstring("(local-exec): "+line+runner.Redacted), line)
		}
	})
	t.Run("error summary", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		f := leaky(t)
		f.vars["fail"] = true
		o := f.run(context.Background(), "apply", "--inputs-hash=h2:x")
		g.Expect(o.res.Error.Kind).To(Equal(runresult.KindStep))
		g.Expect(o.res.Error.Summary).To(ContainSubstring(runner.Redacted))
		g.Expect(strings.Count(o.log, runner.Redacted)).To(BeNumerically(">=", 5))
		clean(t, o, secrets...)
	})
}

func resourceNames(st map[string]any) []string {
	var names []string
	for _, r := range st["resources"].([]any) {
		names = append(names, r.(map[string]any)["name"].(string))
	}
	return names
}

// erroredRuntime wraps the real tofu in a runtime that fails to save state the way OpenTofu
// reports it: apply runs for real, then the state it "could not save" is left in
// errored.tfstate (the real state with the next serial) and apply fails. With CAPX_HANG set
// it then waits to be interrupted, like an apply stopped before it could give up.
func erroredRuntime(t *testing.T) string {
	t.Helper()
	script := `#!/bin/sh
if [ "$1" = apply ]; then
  "` + tofuBin + `" "$@" || exit $?
  "` + tofuBin + `" state pull | awk '{ if (match($0, /"serial": *[0-9]+/)) { n = substr($0, RSTART, RLENGTH); gsub(/[^0-9]/, "", n); sub(/"serial": *[0-9]+/, "\"serial\":" (n + 1)) } print }' > errored.tfstate
  if [ -n "$CAPX_HANG" ]; then
    trap 'kill $pid 2>/dev/null; exit 1' INT TERM
    sleep 60 >/dev/null 2>&1 &
    pid=$!
    wait $pid
  fi
  echo "Error: Failed to save state" >&2
  exit 1
fi
exec "` + tofuBin + `" "$@"
`
	p := filepath.Join(t.TempDir(), "runtime")
	must(t, os.WriteFile(p, []byte(script), 0o755))
	return p
}

// TestErroredStateIsPushed: when the runtime could not save the state, the runner pushes the
// errored.tfstate it left, also when the run was interrupted (on a context of its own).
func TestErroredStateIsPushed(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, o outcome, f *fixture, kind string) {
		g := NewWithT(t)
		g.Expect(o.res.Error.Kind).To(Equal(kind), o.log)
		g.Expect(o.res.Error.Step).To(Equal("apply"))
		last := o.res.Steps[len(o.res.Steps)-1]
		g.Expect(last.Name).To(Equal("push-errored-state"))
		g.Expect(last.ExitCode).To(BeZero(), o.log)
		g.Expect(f.state(context.Background())["serial"]).To(BeNumerically(">", 2), "apply wrote serial 2; the push wrote the errored state over it")
	}
	t.Run("failed apply", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, "machine")
		o := f.run(context.Background(), "apply", "--bin="+erroredRuntime(t))
		check(t, o, f, runresult.KindStep)
		NewWithT(t).Expect(o.res.Error.Summary).To(Equal("Error: Failed to save state"))
	})
	t.Run("interrupted apply", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, "machine")
		f.environ = append(f.environ, "CAPX_HANG=1")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		errored := filepath.Join(f.dir, "work", "root", "errored.tfstate")
		go func() {
			for range 600 {
				if st, err := os.Stat(errored); err == nil && st.Size() > 0 {
					time.Sleep(200 * time.Millisecond)
					cancel()
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		check(t, f.run(ctx, "apply", "--bin="+erroredRuntime(t)), f, runresult.KindInterrupted)
	})
}

// TestHardStop: a runtime that ignores SIGINT and keeps its output open cannot keep the runner
// past --stop-timeout; the result is still written, so the controller learns what happened.
func TestHardStop(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	f := newFixture(t, "machine")
	stubborn := filepath.Join(t.TempDir(), "runtime")
	must(t, os.WriteFile(stubborn, []byte(`#!/bin/sh
if [ "$1" = apply ]; then
  trap '' INT TERM
  echo "applying forever"
  sleep 60
  exit 1
fi
exec "`+tofuBin+`" "$@"
`), 0o755))

	cmd, out, resultFile := f.start("apply", "--bin="+stubborn, "--stop-timeout=6s")
	g.Eventually(out.String, time.Minute, 100*time.Millisecond).Should(ContainSubstring("applying forever"))
	stopped := time.Now()
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	_ = cmd.Wait()
	g.Expect(time.Since(stopped)).To(BeNumerically("<", 15*time.Second))
	o := f.outcome(resultFile, out.String(), cmd.ProcessState.ExitCode())
	g.Expect(o.res.Error).To(Equal(&runresult.Error{Kind: runresult.KindInterrupted, Step: "apply",
		Summary: "the runtime did not stop within --stop-timeout=6s; the state may still be locked"}))
}
