package runner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-exec/tfexec"
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/planhash"
	"github.com/capx-io/capx/internal/captf/runresult"
)

// opSteps runs the steps of the operation after init (anchor: Job model, runner steps).
func (r *run) opSteps(ctx context.Context) *failure {
	switch r.o.op {
	case contract.OpApply:
		return r.apply(ctx)
	case contract.OpPlan:
		return r.planOp(ctx)
	case contract.OpDestroy:
		return r.run1(ctx, "destroy", func(ctx context.Context) error {
			return r.tf.Destroy(ctx, r.varFile(), r.lockTimeout())
		})
	case contract.OpRefresh:
		return r.refresh(ctx)
	case contract.OpDrift:
		return r.drift(ctx)
	case contract.OpRestore:
		return r.restoreOp(ctx)
	}
	return &failure{kind: runresult.KindUsage, step: "prepare", summary: "unknown op " + r.o.op}
}

// apply plans, inspects the plan, and applies a saved plan: the one it just made unless that
// deletes or replaces something (then it stops, blocked, and stores the plan for approval), or,
// for an approved apply, the approved saved plan (applyApproved). A plan without changes ends
// here, successfully.
func (r *run) apply(ctx context.Context) *failure {
	planPath := filepath.Join(r.o.workdir, planFileApply)
	plan, f := r.reviewPlan(ctx, planPath)
	if f != nil {
		return f
	}
	if plan == nil {
		r.logf("the plan has no changes; nothing to apply")
		return nil
	}
	if r.o.expectPlan != "" {
		return r.applyApproved(ctx, plan, planPath)
	}
	if r.res.Destructive {
		if f := r.storePlan(ctx, plan, planPath); f != nil {
			return f
		}
		return &failure{kind: runresult.KindBlocked, step: "show", summary: runresult.Head(
			"the plan deletes or replaces resources and needs an approval (inputs "+r.o.inputsHash+"): "+
				strings.Join(destructiveEntries(r.res.Plan), ", "), runresult.MaxSummaryBytes)}
	}
	return r.run1(ctx, "apply", func(ctx context.Context) error {
		return r.tf.Apply(ctx, tfexec.DirOrPlan(planPath), r.lockTimeout())
	})
}

// staleSavedPlan is how OpenTofu and Terraform refuse a saved plan whose state has changed.
const staleSavedPlan = "Saved plan is stale"

// applyApproved applies the approved saved plan, and nothing else. Approving a plan approves
// its deletes. Two checks stand between the approval and the apply: the plan just made
// (plan, at planPath) must make the same changes as the approved one, and OpenTofu itself
// refuses the saved plan when the state has moved on since it was made. Either refusal applies
// nothing and stores the plan just made, which needs its own approval (plan-changed).
func (r *run) applyApproved(ctx context.Context, plan *tfjson.Plan, planPath string) *failure {
	step := "show"
	changed := func(why string) *failure {
		if f := r.storePlan(ctx, plan, planPath); f != nil {
			return f
		}
		return &failure{kind: runresult.KindPlanChanged, step: step, summary: runresult.Head(
			why+"; nothing was applied, and the new plan needs its own approval", runresult.MaxSummaryBytes)}
	}
	switch {
	case r.approved == nil && r.o.expectPlan == planhash.Empty && !changesResources(r.res.Plan):
		// Approved as changing no resource (a plan Job found none), and still changing none:
		// its output changes need nobody's approval.
		return r.run1(ctx, "apply", func(ctx context.Context) error {
			return r.tf.Apply(ctx, tfexec.DirOrPlan(planPath), r.lockTimeout())
		})
	case r.approved == nil && r.o.expectPlan == planhash.Empty:
		return changed("the approved plan changed no resource, and the plan made now does")
	case r.approved == nil && r.approvedErr != nil:
		return changed(fmt.Sprintf("the approved plan %s could not be read: %v", r.o.expectPlan, r.approvedErr))
	case r.approved == nil:
		return changed("the manager gave no saved plan of the approved plan " + r.o.expectPlan + " (it could not verify one)")
	}
	same, err := planhash.SameChanges(r.approved.plan, plan)
	if err != nil {
		return &failure{kind: runresult.KindStep, step: "show", summary: err.Error()}
	}
	if !same {
		return changed("the plan made now differs from the approved plan " + r.o.expectPlan)
	}
	// The hash and the approver saw the saved plan's document; what applies is its file. The
	// file's own show -json must make the same changes, or the document lied about it.
	fromFile, f := r.show(ctx, r.approved.path)
	if f != nil {
		return f
	}
	if same, err = planhash.SameChanges(r.approved.plan, fromFile); err != nil {
		return &failure{kind: runresult.KindStep, step: "show", summary: err.Error()}
	} else if !same {
		return changed("the approved plan " + r.o.expectPlan + "'s plan file does not make the changes its document (which the approval covers) " +
			"lists: the saved plan was not written by a plan Job of this object")
	}
	f = r.run1(ctx, "apply", func(ctx context.Context) error {
		return r.tf.Apply(ctx, tfexec.DirOrPlan(r.approved.path), r.lockTimeout())
	})
	if f != nil && f.kind == runresult.KindStep && strings.Contains(f.summary, staleSavedPlan) {
		step = "apply"
		return changed("the state changed since the approved plan " + r.o.expectPlan + " was made: OpenTofu refused its saved plan as stale")
	}
	return f
}

// planOp is the plan a Manual object shows for approval: its summary, and the saved plan and
// readable changes the manager records it from.
func (r *run) planOp(ctx context.Context) *failure {
	planPath := filepath.Join(r.o.workdir, planFileReview)
	plan, f := r.reviewPlan(ctx, planPath)
	if f == nil && plan != nil {
		f = r.storePlan(ctx, plan, planPath)
	}
	return f
}

// reviewPlan validates, plans into planPath and, when the plan has changes, reads it back and
// records its summary and hash in the result. It returns a nil plan when there are no changes.
func (r *run) reviewPlan(ctx context.Context, planPath string) (*tfjson.Plan, *failure) {
	if f := r.validate(ctx); f != nil {
		return nil, f
	}
	changed, f := r.plan(ctx, planPath, tfexec.Refresh(true))
	if f != nil {
		return nil, f
	}
	if !changed {
		r.noChanges()
		return nil, nil
	}
	plan, f := r.show(ctx, planPath)
	if f != nil {
		return nil, f
	}
	r.describePlan(plan)
	return plan, nil
}

// refresh reads the real objects and records them, but only what changed: it plans
// refresh-only and applies that plan only when OpenTofu finds something to record (a resource
// changed or gone outside OpenTofu, an output that reads differently). A refresh that finds
// nothing writes nothing, so the state keeps its serial and a plan waiting for approval, which
// is bound to that serial, stays approvable while a pool refreshes its membership every minute.
// (`apply -refresh-only` writes the state whenever its bytes differ, and OpenTofu's record of
// check results comes out in another order on most runs: the serial moved on nearly every time.)
func (r *run) refresh(ctx context.Context) *failure {
	planPath := filepath.Join(r.o.workdir, planFileRefresh)
	f := r.run1(ctx, "refresh", func(ctx context.Context) error {
		found, err := r.tf.Plan(ctx, tfexec.RefreshOnly(true), tfexec.Out(planPath), r.varFile(), r.lockTimeout())
		if err != nil {
			return err
		}
		if !found {
			r.logf("the refresh found nothing to record; the state is left as it was")
			return nil
		}
		return r.tf.Apply(ctx, tfexec.DirOrPlan(planPath), r.lockTimeout())
	})
	if f == nil && r.res.Changes == nil {
		r.res.Changes = &runresult.Changes{} // a refresh changes no resource
	}
	return f
}

// drift refreshes the state from the real objects, then plans without refreshing again: every
// change in that plan is a difference between the real objects and the configuration.
func (r *run) drift(ctx context.Context) *failure {
	if f := r.refresh(ctx); f != nil {
		return f
	}
	planPath := filepath.Join(r.o.workdir, planFileReview)
	changed, f := r.plan(ctx, planPath, tfexec.Refresh(false))
	if f != nil {
		return f
	}
	r.res.Drift = &runresult.Drift{}
	if !changed {
		return nil
	}
	plan, f := r.show(ctx, planPath)
	if f != nil {
		return f
	}
	d := planhash.DriftSummary(plan)
	r.res.Drift = &d
	return nil
}

// restoreOp pushes the assembled backup over the current state and checks the backend now
// lists resources (unless the backup counted none).
//
// Before anything is pushed, the backup's lineage is checked against the current state's (as
// `state pull` prints it, under the lock the push takes next): a backup of another history is
// refused rather than forced over it. The push is then a plain `state push`, which OpenTofu
// itself refuses on a lineage mismatch or a lower serial; no -force.
//
// Pushed as it is, a backup of serial N would come back under a serial the backend may already
// have held with other contents, so two backups of one serial would differ and a later restore
// by serial could pick the wrong one; and `state push` refuses a serial below the current one,
// or the current one with other contents. The backup is therefore pushed carrying a serial
// past the current one: the restored state gets a serial never seen before, with the backup's
// lineage and contents.
func (r *run) restoreOp(ctx context.Context) *failure {
	if err := r.o.checkRestoreDigest(); err != nil {
		return &failure{kind: runresult.KindStep, step: "prepare", summary: err.Error()}
	}
	plain, f := r.decryptRestore(ctx)
	if f != nil {
		return f
	}
	force := false
	if f := r.run1(ctx, "state-pull", func(ctx context.Context) error {
		current, err := r.tf.StatePull(ctx)
		if err != nil {
			return err
		}
		if plain != nil {
			if err := sameLineageDoc(plain, []byte(current)); err != nil {
				return &stepError{code: 1, summary: err.Error()}
			}
			plain, err = raiseSerialDoc(plain, []byte(current))
			return err
		}
		if force, err = unwritten([]byte(current)); err != nil {
			return &stepError{code: 1, summary: err.Error()}
		}
		if !force {
			if err := sameLineage(r.restore, []byte(current)); err != nil {
				return &stepError{code: 1, summary: err.Error()}
			}
		}
		return raiseSerial(r.restore, []byte(current))
	}); f != nil {
		return f
	}
	if f := r.run1(ctx, "state-push", func(ctx context.Context) error {
		if plain != nil {
			return r.pushInMemory(ctx, plain)
		}
		return r.tf.StatePush(ctx, r.restore, tfexec.Lock(true), r.lockTimeout(), tfexec.Force(force))
	}); f != nil {
		return f
	}
	return r.run1(ctx, "state-list", func(ctx context.Context) error {
		n, err := r.stateList(ctx)
		if err == nil && n == 0 && r.o.restoreResources > 0 {
			return &stepError{code: 1, summary: fmt.Sprintf(
				"state list shows no resources after the restore, but the backup counted %d managed resources", r.o.restoreResources)}
		}
		return err
	})
}

// stateList runs `state list` itself: terraform-exec has no wrapper for it.
func (r *run) stateList(ctx context.Context) (int, error) {
	cmd := exec.CommandContext(ctx, r.o.bin, "state", "list")
	cmd.Dir = r.root
	for k, v := range r.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "TF_IN_AUTOMATION=1", "TF_INPUT=0")
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, r.stdout)
	cmd.Stderr = r.stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = r.o.childGrace()
	if err := cmd.Run(); err != nil {
		return 0, err
	}
	n := 0
	for line := range strings.SplitSeq(out.String(), "\n") {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	return n, nil
}

// validate runs validate -json; its diagnostics are printed (redacted) by the runner, since the
// JSON itself is kept out of the log.
func (r *run) validate(ctx context.Context) *failure {
	err := r.step(ctx, "validate", true, func(ctx context.Context) error {
		out, err := r.tf.Validate(ctx)
		if err != nil {
			return err
		}
		var msgs []string
		for _, d := range out.Diagnostics {
			msg := "Warning: " + d.Summary
			if d.Severity == tfjson.DiagnosticSeverityError {
				msg = "Error: " + d.Summary
			}
			if d.Detail != "" {
				msg += ": " + d.Detail
			}
			if d.Range != nil {
				msg += fmt.Sprintf(" (%s line %d)", d.Range.Filename, d.Range.Start.Line)
			}
			fmt.Fprintln(r.stderr, msg)
			if d.Severity == tfjson.DiagnosticSeverityError {
				msgs = append(msgs, msg)
			}
		}
		if !out.Valid {
			return &stepError{code: 1, summary: strings.Join(msgs, "\n")}
		}
		return nil
	})
	if err != nil {
		return r.stepFailure(ctx, "validate", err)
	}
	return nil
}

// plan runs plan -detailed-exitcode -out=planPath; changed reports exit code 2.
func (r *run) plan(ctx context.Context, planPath string, refresh *tfexec.RefreshOption) (bool, *failure) {
	var changed bool
	f := r.run1(ctx, "plan", func(ctx context.Context) error {
		var err error
		changed, err = r.tf.Plan(ctx, tfexec.Out(planPath), r.varFile(), r.lockTimeout(), refresh)
		return err
	})
	if f == nil && changed {
		r.res.Steps[len(r.res.Steps)-1].ExitCode = 2
	}
	return changed, f
}

// show reads the saved plan as JSON (kept out of the log: it holds every value) and learns its
// sensitive values for redaction.
func (r *run) show(ctx context.Context, planPath string) (*tfjson.Plan, *failure) {
	var plan *tfjson.Plan
	err := r.step(ctx, "show", true, func(ctx context.Context) error {
		var err error
		plan, err = r.tf.ShowPlanFile(ctx, planPath, tfexec.JSONNumber(true))
		return err
	})
	if err != nil {
		return nil, r.stepFailure(ctx, "show", err)
	}
	r.red.AddSensitive(plan)
	return plan, nil
}

// describePlan records the plan's summary and destructiveness. The hash of a plan that changes
// resources is the manager's to compute (from the saved plan, with a key no Job sees); one that
// changes outputs only needs no approval and is reported as Empty.
func (r *run) describePlan(plan *tfjson.Plan) {
	s := planhash.Summarize(plan)
	r.res.Plan = &s
	r.res.Destructive = planhash.Destructive(plan)
	if !changesResources(&s) {
		r.res.PlanHash = planhash.Empty
	}
	r.logf("plan: %d to create, %d to update, %d to replace, %d to delete, %d output changes",
		s.Create, s.Update, s.Replace, s.Delete, s.OutputChanges)
}

// noChanges records a plan without changes; its hash is Empty whatever the key.
func (r *run) noChanges() {
	r.res.Plan = &runresult.PlanSummary{}
	r.res.PlanHash = planhash.Empty
}

// run1 runs one step and turns its error into the run's failure.
func (r *run) run1(ctx context.Context, name string, fn func(ctx context.Context) error) *failure {
	if err := r.step(ctx, name, false, fn); err != nil {
		return r.stepFailure(ctx, name, err)
	}
	return nil
}

func (r *run) varFile() *tfexec.VarFileOption {
	return tfexec.VarFile(filepath.Join(r.root, contract.VarsFile))
}

func (r *run) lockTimeout() *tfexec.LockTimeoutOption {
	return tfexec.LockTimeout(r.o.lockTimeout.String())
}

// changesResources reports a plan that creates, updates, replaces or deletes something, as the
// manager counts it (a plan that changes outputs only needs no approval).
func changesResources(s *runresult.PlanSummary) bool {
	return s != nil && s.Create+s.Update+s.Replace+s.Delete > 0
}

func destructiveEntries(s *runresult.PlanSummary) []string {
	var out []string
	for _, e := range s.Resources {
		if strings.Contains(e, "(delete") || strings.Contains(e, "(replace") {
			out = append(out, e)
		}
	}
	if s.Truncated {
		out = append(out, "...")
	}
	return out
}

// checkRestoreDigest checks that the projected chunk files are the backup the manager verified
// (--restore-digest): the Secrets may have been replaced between its check and the Pod's start.
func (o *options) checkRestoreDigest() error {
	if o.restoreDigest == "" {
		return nil
	}
	sum := sha256.New()
	for i := range o.restoreChunks {
		b, err := os.ReadFile(filepath.Join(o.config, contract.RestoreDir, strconv.Itoa(i)))
		if err != nil {
			return fmt.Errorf("runner: read restore chunk %d: %w", i, err)
		}
		sum.Write(b)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != o.restoreDigest {
		return fmt.Errorf("runner: the backup's chunks have digest %s, not the %s the manager verified: a backup Secret changed since; nothing was pushed", got, o.restoreDigest)
	}
	return nil
}

// unwritten reports whether current (as `state pull` prints it) is a state that records
// nothing and never did: no resources, no outputs and serial 0 or 1, such as the one `init`
// writes into a backend that had no state (a namespace re-created after its state was lost),
// with a lineage of its own. A restore replaces it as it would no state at all, with -force,
// since OpenTofu refuses another lineage otherwise; nothing it could record is lost. A state
// emptied later (a destroy, serial 2 or more) has a history and keeps the lineage check. No
// state at all is not unwritten (nothing to force).
func unwritten(current []byte) (bool, error) {
	if len(bytes.TrimSpace(current)) == 0 {
		return false, nil
	}
	var cur struct {
		Serial    uint64                     `json:"serial"`
		Resources []json.RawMessage          `json:"resources"`
		Outputs   map[string]json.RawMessage `json:"outputs"`
	}
	if err := json.Unmarshal(current, &cur); err != nil {
		return false, fmt.Errorf("runner: read the current state: %w", err)
	}
	return cur.Serial <= 1 && len(cur.Resources) == 0 && len(cur.Outputs) == 0, nil
}

// sameLineage checks that the state file at path continues the history of current (a state as
// `state pull` prints it; empty when there is none): their lineages are equal.
func sameLineage(path string, current []byte) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return sameLineageDoc(b, current)
}

// sameLineageDoc is sameLineage of a restored state in memory.
func sameLineageDoc(b, current []byte) error {
	if len(bytes.TrimSpace(current)) == 0 {
		return nil
	}
	var cur, restored struct {
		Lineage string `json:"lineage"`
	}
	if err := json.Unmarshal(current, &cur); err != nil {
		return fmt.Errorf("runner: read the current state's lineage: %w", err)
	}
	if err := json.Unmarshal(b, &restored); err != nil {
		return fmt.Errorf("runner: read the restored state's lineage: %w", err)
	}
	if cur.Lineage != "" && cur.Lineage != restored.Lineage {
		return fmt.Errorf("runner: the backup is of lineage %s, the current state of lineage %s: it is another state's history, and nothing was pushed", restored.Lineage, cur.Lineage)
	}
	return nil
}

// raiseSerial sets the serial of the state file at path to one past that of current (a state as
// `state pull` prints it; empty when there is none) when current's is not lower. Everything
// else in the file is kept as it is.
func raiseSerial(path string, current []byte) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	raised, err := raiseSerialDoc(b, current)
	if err != nil || bytes.Equal(raised, b) {
		return err
	}
	return os.WriteFile(path, raised, 0o600)
}

// raiseSerialDoc is raiseSerial of a restored state in memory: it returns b itself when the
// serial is already past the current one.
func raiseSerialDoc(b, current []byte) ([]byte, error) {
	var cur struct {
		Serial int64 `json:"serial"`
	}
	if len(bytes.TrimSpace(current)) > 0 {
		if err := json.Unmarshal(current, &cur); err != nil {
			return nil, fmt.Errorf("runner: read the current state's serial: %w", err)
		}
	}
	var st map[string]json.RawMessage
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("runner: read the restored state: %w", err)
	}
	var serial int64
	if err := json.Unmarshal(st["serial"], &serial); err != nil {
		return nil, fmt.Errorf("runner: read the restored state's serial: %w", err)
	}
	if cur.Serial < serial {
		return b, nil
	}
	st["serial"] = json.RawMessage(strconv.FormatInt(cur.Serial+1, 10))
	return json.Marshal(st)
}
