package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capx-io/capx/internal/captf/runner"
	"github.com/capx-io/capx/internal/captf/runresult"
)

// TestRestoreKeepsStateOutOfTheLog: a restore reads the current state (state pull) to keep
// serials increasing; that state, with every value in it, never reaches the pod log.
func TestRestoreKeepsStateOutOfTheLog(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, "cluster")
	f.run(ctx, "apply").ok(t)
	st := f.state(ctx)
	lineage := st["lineage"].(string)
	f.writeRestoreChunks(f.stateSecret(ctx).Data["tfstate"])
	o := f.run(ctx, "restore", "--restore-chunks=1").ok(t)
	g.Expect(o.stepNames()).To(ContainElement("state-pull"))
	g.Expect(o.log).NotTo(ContainSubstring(lineage), "the pulled state's lineage")
	g.Expect(o.log).NotTo(ContainSubstring(`"terraform_version"`))
	g.Expect(o.log).NotTo(ContainSubstring(`"resources"`))
}

// leakyRun runs the leaky module, which prints its secrets, with a Secret-sourced variable
// whose name says nothing about it.
func leakyRun(t *testing.T, extra ...string) outcome {
	f := newFixture(t, "leaky")
	credFile := filepath.Join(f.dir, "creds", "CAPX_CRED")
	must(t, os.WriteFile(credFile, []byte("cred-from-the-mirror-5b1e\n"), 0o440))
	f.environ = append(f.environ, "CAPX_CRED=cred-from-the-mirror-5b1e", "DB_CONN=postgres://app:pw-8d2e41@db/app")
	f.vars["token_file"] = credFile
	if len(extra) > 0 && extra[0] == "fail_split" {
		f.vars["fail_split"] = true
		extra = extra[1:]
	}
	return f.run(context.Background(), "apply", extra...)
}

// TestSecretSourcedEnvIsRedacted: a variable the Job fills from a Secret (valueFrom.
// secretKeyRef, passed as --secret-env) is redacted whatever its name.
func TestSecretSourcedEnvIsRedacted(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	o := leakyRun(t, "--secret-env=DB_CONN").ok(t)
	g.Expect(o.log).To(ContainSubstring("(local-exec): secretenv=" + runner.Redacted))
	g.Expect(o.log).NotTo(ContainSubstring("pw-8d2e41"))
}

// TestErrorTailRedactedAcrossColourCodes: a secret split by a colour code is whole once the
// codes are gone; neither the log nor the error summary (status.lastRun) shows it.
func TestErrorTailRedactedAcrossColourCodes(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	o := leakyRun(t, "fail_split")
	g.Expect(o.res.Error).NotTo(BeNil())
	g.Expect(o.res.Error.Kind).To(Equal(runresult.KindStep))
	// The summary is the first error block (the provisioner's failure), not the module's own
	// "Error:" line printed inside it; the split secret is in the log, redacted.
	g.Expect(o.res.Error.Summary).To(HavePrefix("Error: local-exec provisioner error"))
	g.Expect(o.log).To(ContainSubstring("failing with " + runner.Redacted))
	for _, text := range []string{o.raw, o.log, strings.ReplaceAll(o.log, "\x1b[1m", "")} {
		g.Expect(text).NotTo(ContainSubstring("bootstrap-secret-value-9876"))
		g.Expect(text).NotTo(ContainSubstring("ret-value-9876"))
	}
}

// TestClusterOutputsStayOutOfTheLog: a machine's captf_cluster_outputs (the cluster's
// sensitive exports) is declared sensitive in the rendered root, so the plan never prints it
// and the runner redacts it wherever it shows.
func TestClusterOutputsStayOutOfTheLog(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	f := newFixture(t, "machine")
	f.vars["captf_cluster_outputs"] = map[string]any{"network_name": "net-7d1c9e42", "join_token": "abcdef.0123456789abcdef"}
	o := f.run(context.Background(), "plan").ok(t)
	g.Expect(o.res.Plan).NotTo(BeNil())
	g.Expect(o.log).NotTo(ContainSubstring("net-7d1c9e42"))
	g.Expect(o.log).NotTo(ContainSubstring("0123456789abcdef"))
}
