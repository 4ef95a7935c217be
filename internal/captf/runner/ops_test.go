package runner_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/planhash"
	"github.com/capx-io/capx/internal/captf/runresult"
)

// TestPlanApplyDestroy walks a cluster through its life: plan for review, apply, a plan with
// nothing to do, destroy.
func TestPlanApplyDestroy(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, "cluster")

	plan := f.run(ctx, "plan").ok(t)
	g.Expect(plan.stepNames()).To(Equal([]string{"init", "validate", "plan", "show"}))
	g.Expect(plan.res.Steps[2].ExitCode).To(Equal(2))
	g.Expect(plan.res.Runtime).To(Equal("1.12.6"))
	g.Expect(plan.res.Plan).To(Equal(&runresult.PlanSummary{Create: 4, OutputChanges: 4, Resources: []string{
		"module.role.terraform_data.control_plane (create)",
		`module.role.terraform_data.failure_domain["fd-a"] (create)`,
		`module.role.terraform_data.failure_domain["fd-b"] (create)`,
		"module.role.terraform_data.network (create)",
	}}))
	g.Expect(plan.res.PlanHash).To(BeEmpty(), "only the manager hashes a plan that changes something")
	g.Expect(plan.res.Destructive).To(BeFalse())

	apply := f.run(ctx, "apply").ok(t)
	g.Expect(apply.stepNames()).To(Equal([]string{"init", "validate", "plan", "show", "apply"}), "every apply plans first")
	g.Expect(apply.res.Changes).To(Equal(&runresult.Changes{Add: 4}))
	st := f.state(ctx)
	g.Expect(st["version"]).To(BeNumerically("==", 4))
	g.Expect(st["outputs"]).To(HaveKey("control_plane_endpoint"))
	g.Expect(f.stateSecret(ctx).Labels).To(HaveKeyWithValue("captf.io/managed", "true"), "backend labels come from --backend-config")

	again := f.run(ctx, "plan").ok(t)
	g.Expect(again.res.Plan).To(Equal(&runresult.PlanSummary{}))
	g.Expect(again.res.PlanHash).To(Equal(planhash.Empty))
	g.Expect(again.stepNames()).To(Equal([]string{"init", "validate", "plan"}))

	destroy := f.run(ctx, "destroy").ok(t)
	g.Expect(destroy.stepNames()).To(Equal([]string{"init", "destroy"}))
	g.Expect(destroy.res.Changes).To(Equal(&runresult.Changes{Destroy: 4}))
	g.Expect(f.state(ctx)["resources"]).To(BeEmpty())
	g.Expect(f.lockHolder(ctx)).To(BeEmpty())
}

// TestRoles applies the machine and machine pool test modules through roots of the generated
// shape: every contract input reaches the module and every contract output is in the state.
func TestRoles(t *testing.T) {
	t.Parallel()
	for role, want := range map[string]map[string]any{
		"machine":     {"provider_id": "capx-test:///m0", "failure_domain": "fd-a"},
		"machinepool": {"provider_id": "capx-test://pool/mp0", "replicas": float64(2), "provider_id_list": []any{"capx-test:///mp0-0", "capx-test:///mp0-1"}},
	} {
		t.Run(role, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ctx := context.Background()
			f := newFixture(t, role)
			f.run(ctx, "apply").ok(t)
			outputs := f.state(ctx)["outputs"].(map[string]any)
			for _, name := range contract.RoleOutputs[roleOf(role)] {
				g.Expect(outputs).To(HaveKey(name))
			}
			for name, v := range want {
				g.Expect(outputs[name].(map[string]any)["value"]).To(Equal(v), name)
			}
		})
	}
}

func roleOf(role string) contract.Role {
	r, _ := contract.RoleOf(roleKinds[role])
	return r
}

// TestRefresh: refresh updates the state from the real objects and re-evaluates outputs, and
// changes no resource.
func TestRefresh(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, "cluster")
	f.run(ctx, "apply").ok(t)
	serial := f.state(ctx)["serial"].(float64)

	f.vars["health_message"] = "refreshed"
	res := f.run(ctx, "refresh").ok(t)
	g.Expect(res.stepNames()).To(Equal([]string{"init", "refresh"}))
	g.Expect(res.res.Changes).To(Equal(&runresult.Changes{}))
	st := f.state(ctx)
	g.Expect(st["outputs"].(map[string]any)["health"].(map[string]any)["value"]).To(HaveKeyWithValue("message", "refreshed"))
	g.Expect(st["serial"]).To(Equal(serial+1), "what the refresh found is recorded under the next serial")
}

// TestRefreshWritesOnlyChanges: a refresh that finds nothing to record writes no state, so the
// serial a plan waiting for approval was made against stays (a pool refreshes its membership
// every minute). `apply -refresh-only` writes the state whenever its bytes differ, and
// OpenTofu's record of check results comes out in another order on most runs, so it moved the
// serial on nearly every time. (A refresh that finds something records it: TestRefresh.)
func TestRefreshWritesOnlyChanges(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, "machinepool") // check blocks and a postcondition: check results in the state
	f.run(ctx, "apply").ok(t)
	serial := f.state(ctx)["serial"]
	for range 4 {
		res := f.run(ctx, "refresh").ok(t)
		g.Expect(res.stepNames()).To(Equal([]string{"init", "refresh"}))
		g.Expect(res.res.Changes).To(Equal(&runresult.Changes{}))
		g.Expect(f.state(ctx)["serial"]).To(Equal(serial), "a refresh that found nothing wrote the state")
	}
}

// TestDrift: drift is found when the recorded object no longer matches the configuration.
// terraform_data has no remote object, so the test changes the object the way a refresh would
// record an edit made outside OpenTofu: it rewrites the resource's attributes in the state
// Secret. The drift check refreshes (terraform_data reads back what is recorded) and its plan
// then has to change the object back.
func TestDrift(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, "cluster")
	f.run(ctx, "apply").ok(t)

	clean := f.run(ctx, "drift").ok(t)
	g.Expect(clean.stepNames()).To(Equal([]string{"init", "refresh", "plan"}))
	g.Expect(clean.res.Drift).To(Equal(&runresult.Drift{}))

	f.editState(ctx, func(st map[string]any) {
		for _, r := range st["resources"].([]any) {
			res := r.(map[string]any)
			if res["name"] == "control_plane" {
				attrs := res["instances"].([]any)[0].(map[string]any)["attributes"].(map[string]any)
				for _, k := range []string{"input", "output"} {
					attrs[k].(map[string]any)["value"].(map[string]any)["service_domain"] = "edited.out.of.band"
				}
			}
		}
	})
	drift := f.run(ctx, "drift").ok(t)
	g.Expect(drift.stepNames()).To(Equal([]string{"init", "refresh", "plan", "show"}))
	g.Expect(drift.res.Drift).To(Equal(&runresult.Drift{Resources: 1, Addresses: []string{"module.role.terraform_data.control_plane"}}))
}

// editState rewrites the state in its Secret as someone editing it by hand would: same
// lineage, next serial.
func (f *fixture) editState(ctx context.Context, edit func(map[string]any)) {
	f.t.Helper()
	s := f.stateSecret(ctx)
	st := decodeState(f.t, s.Data[contract.BackendStateKey])
	edit(st)
	st["serial"] = st["serial"].(float64) + 1
	b, err := json.Marshal(st)
	must(f.t, err)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(b)
	must(f.t, zw.Close())
	s.Data[contract.BackendStateKey] = gz.Bytes()
	must(f.t, env.Client.Update(ctx, s))
}

// TestRestore pushes a backed-up state back from chunk files, the way a restore Job mounts a
// backup: each chunk Secret's gzip bytes as <config>/restore/<i>.
func TestRestore(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, "cluster")
	f.run(ctx, "apply").ok(t)
	backup := f.stateSecret(ctx).Data[contract.BackendStateKey]
	lineage := f.state(ctx)["lineage"]

	f.run(ctx, "destroy").ok(t)
	empty := f.stateSecret(ctx).Data[contract.BackendStateKey]
	g.Expect(f.state(ctx)["resources"]).To(BeEmpty())
	destroyed := f.state(ctx)["serial"].(float64)

	// Three chunks, split anywhere in the gzip stream, plus a stale tail that must be ignored.
	third := len(backup) / 3
	f.writeRestoreChunks(backup[:third], backup[third:2*third], append(append([]byte{}, backup[2*third:]...), empty...))
	chunks := append(append([]byte{}, backup...), empty...)
	digest := sha256.Sum256(chunks)
	res := f.run(ctx, "restore", "--restore-chunks=3", "--restore-resources=4", "--restore-digest="+hex.EncodeToString(digest[:])).ok(t)
	g.Expect(res.stepNames()).To(Equal([]string{"init", "state-pull", "state-push", "state-list"}))
	st := f.state(ctx)
	g.Expect(st["lineage"]).To(Equal(lineage))
	g.Expect(st["serial"]).To(BeNumerically(">", destroyed), "the restored state takes a new serial, never an earlier one again")
	g.Expect(st["resources"]).To(HaveLen(3), "network, control_plane, failure_domain (2 instances)")
	g.Expect(res.log).To(ContainSubstring("module.role.terraform_data.network"))

	// A backup that lists nothing while the controller counted resources fails the check.
	f.writeRestoreChunks(empty)
	bad := f.run(ctx, "restore", "--restore-chunks=1", "--restore-resources=4")
	g.Expect(bad.res.Error).To(Equal(&runresult.Error{Kind: runresult.KindStep, Step: "state-list",
		Summary: "state list shows no resources after the restore, but the backup counted 4 managed resources"}))

	// A backup of another history (another lineage) is refused before anything is pushed,
	// where -force would have replaced the state (issue 9).
	before := f.state(ctx)
	f.writeRestoreChunks(relineage(t, backup, "00000000-0000-4000-8000-000000000000"))
	foreign := f.run(ctx, "restore", "--restore-chunks=1", "--restore-resources=4")
	g.Expect(foreign.res.Error).NotTo(BeNil())
	g.Expect(foreign.res.Error.Step).To(Equal("state-pull"))
	g.Expect(foreign.res.Error.Summary).To(ContainSubstring("another state's history, and nothing was pushed"))
	g.Expect(foreign.stepNames()).NotTo(ContainElement("state-push"))
	after := f.state(ctx)
	g.Expect(after["lineage"]).To(Equal(before["lineage"]))
	g.Expect(after["serial"]).To(Equal(before["serial"]))

	// Chunks other than the backup the manager verified (a Secret replaced since) are refused
	// before anything runs (issue 9).
	f.writeRestoreChunks(backup)
	sum := sha256.Sum256(backup)
	sum[len(sum)-1] ^= 0xff // another digest, whatever the real one is
	other := f.run(ctx, "restore", "--restore-chunks=1", "--restore-digest="+hex.EncodeToString(sum[:]))
	g.Expect(other.res.Error).NotTo(BeNil())
	g.Expect(other.res.Error.Summary).To(ContainSubstring("a backup Secret changed since; nothing was pushed"))
	g.Expect(other.stepNames()).NotTo(ContainElement("state-push"))
	g.Expect(f.state(ctx)["serial"]).To(Equal(after["serial"]))

	// A missing chunk fails before any runtime step.
	missing := f.run(ctx, "restore", "--restore-chunks=2")
	g.Expect(missing.res.Error.Kind).To(Equal(runresult.KindStep))
	g.Expect(missing.res.Error.Step).To(Equal("prepare"))
	g.Expect(missing.res.Error.Summary).To(ContainSubstring("read restore chunk 1"))
}

// relineage rewrites a gzip-compressed state with another lineage.
func relineage(t *testing.T, gz []byte, lineage string) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	must(t, err)
	zr.Multistream(false)
	raw, err := io.ReadAll(zr)
	must(t, err)
	var st map[string]any
	must(t, json.Unmarshal(raw, &st))
	st["lineage"] = lineage
	raw, err = json.Marshal(st)
	must(t, err)
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	_, _ = zw.Write(raw)
	must(t, zw.Close())
	return out.Bytes()
}

func (f *fixture) writeRestoreChunks(chunks ...[]byte) {
	dir := filepath.Join(f.dir, "config", contract.RestoreDir)
	must(f.t, os.RemoveAll(dir))
	must(f.t, os.MkdirAll(dir, 0o755))
	for i, c := range chunks {
		must(f.t, os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), c, 0o644))
	}
}

// TestInvalidConfiguration: validate's diagnostics become the failure summary.
func TestInvalidConfiguration(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	f := newFixture(t, "cluster")
	f.vars["captf_contract"] = "v9"
	res := f.run(context.Background(), "apply")
	g.Expect(res.code).To(Equal(1))
	g.Expect(res.res.Error.Kind).To(Equal(runresult.KindStep))
	g.Expect(res.res.Error.Step).To(Equal("plan"), "every apply plans first")
	g.Expect(res.res.Error.Summary).To(ContainSubstring("This module implements CAPTF module contract v1alpha1."))

	f.vars["captf_contract"] = "v1alpha1"
	root := filepath.Join(f.dir, "config", contract.RootModuleFile)
	b, err := os.ReadFile(root)
	must(t, err)
	must(t, os.WriteFile(root, bytes.Replace(b, []byte(`"network_cidr": "${var.network_cidr}"`), []byte(`"no_such_input": "${var.network_cidr}"`), 1), 0o644))
	res = f.run(context.Background(), "plan")
	g.Expect(res.res.Error.Step).To(Equal("validate"))
	g.Expect(res.res.Error.Summary).To(ContainSubstring(`Error: Extraneous JSON object property: No argument or block type is named "no_such_input"`))
}
