package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"
	corev1 "k8s.io/api/core/v1"

	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/runresult"
)

// run is the state of one `runner run` invocation.
type run struct {
	o   *options
	env map[string]string // the runtime's environment (childEnv)
	log io.Writer         // the pod log, shared by the runtime's streams and the runner's lines
	red *redactor

	// stdout and stderr are the runtime's streams after redaction; they also feed counts (the
	// apply summary line) and tail (the error summary).
	stdout, stderr *redactWriter
	counts         *countScanner
	tail           *tailBuffer

	tf       *tfexec.Terraform // set by setupRuntime
	root     string            // <workdir>/root, set by prepare
	approved *approvedPlan     // set by prepare for an approved apply given its saved plan
	restore  string            // assembled state file, set by prepare for restore
	// approvedErr is why prepare could not read the approved saved plan.
	approvedErr error

	res     runresult.Result
	current atomic.Value // name of the running step, for a result written on a hard stop
	events  *reporter    // progress Events; nil posts none

	// stoppedAt is when the first SIGTERM/SIGINT arrived; it bounds the time left for saving state.
	stopMu    sync.Mutex
	stoppedAt time.Time
}

// execute runs the operation under signal handling, writes the result and returns the error
// carrying the exit code.
func (o *options) execute(parent context.Context, rio IO) error {
	if parent == nil {
		parent = context.Background()
	}
	// The first SIGTERM (the kubelet stopping the pod) or SIGINT cancels the running step;
	// later ones are swallowed so the runner can still save state and write its result.
	ctx, stop := signal.NotifyContext(parent, syscall.SIGTERM, os.Interrupt)
	defer stop()

	log := &syncWriter{w: rio.Out}
	r := &run{
		o:      o,
		log:    log,
		red:    newRedactor(),
		counts: &countScanner{},
		tail:   &tailBuffer{},
		res:    runresult.Result{Version: runresult.Version, Op: o.op, Image: o.image},
	}
	r.stdout = r.red.writer(io.MultiWriter(log, r.counts))
	r.stderr = r.red.writer(io.MultiWriter(log, r.tail))
	// The kubelet kills the pod when its grace period ends, and a result written after that
	// is never read. If the runtime outlives --stop-timeout (a child holding its output open,
	// a hung provider), the runner writes an interrupted result and returns without it.
	hardStop := make(chan struct{})
	onStop := context.AfterFunc(ctx, func() {
		r.stopMu.Lock()
		r.stoppedAt = time.Now()
		r.stopMu.Unlock()
		r.logf("stop requested: interrupting the running step (up to %s to stop and save state)", o.stopTimeout)
		time.AfterFunc(o.stopTimeout, func() { close(hardStop) })
	})
	// Returning cancels ctx (stop above); that is no stop request.
	defer onStop()

	events, err := newReporter(o.eventObject, o.jobName, rio.Environ(), r.logf)
	if err != nil {
		r.logf("%v", err)
	}
	r.events = events
	r.logf("starting %s", o.op)
	r.events.emit(ctx, corev1.EventTypeNormal, "RunStarted", fmt.Sprintf("%s started in %s", o.op, o.jobName))
	done := make(chan *failure, 1)
	go func() { done <- r.runOp(ctx, rio.Environ()) }()
	var res runresult.Result
	select {
	case f := <-done:
		res = r.res
		if f != nil {
			res.Error = &runresult.Error{Kind: f.kind, Step: f.step, Summary: f.summary}
		}
	case <-hardStop:
		// r.res still belongs to the runOp goroutine; report what is known without it.
		step, _ := r.current.Load().(string)
		res = runresult.Result{Version: runresult.Version, Op: o.op, Image: o.image, Error: &runresult.Error{
			Kind: runresult.KindInterrupted, Step: step,
			Summary: fmt.Sprintf("the runtime did not stop within --stop-timeout=%s; the state may still be locked", o.stopTimeout)}}
	}
	// Every text of the result passes the redactor once more, whoever wrote it.
	res = res.Redact(r.red.String)
	if err := writeResult(o.resultFile, res); err != nil {
		r.logf("%v", err)
		return &ExitError{Code: ExitFailed, Err: err}
	}
	if res.Held() {
		// The guard did its job: nothing changed, and the plan waits for an approver. Monitoring
		// that pages on failed Jobs and Warning Events must not page on every held plan.
		r.logf("%s held for approval: %s", o.op, res.Error.Summary)
		r.events.emit(ctx, corev1.EventTypeNormal, "PlanHeld", heldNote(o.op, res.Plan))
		return nil
	}
	if e := res.Error; e != nil {
		r.logf("%s failed (%s at %s): %s", o.op, e.Kind, e.Step, e.Summary)
		r.events.emit(ctx, corev1.EventTypeWarning, "RunFailed", fmt.Sprintf("%s failed (%s at step %s)", o.op, e.Kind, e.Step))
		return &ExitError{Code: ExitFailed, Err: fmt.Errorf("runner: %s failed: %s at step %s", o.op, e.Kind, e.Step)}
	}
	r.logf("%s succeeded", o.op)
	r.events.emit(ctx, corev1.EventTypeNormal, "RunFinished", runFinishedNote(o.op, res.Changes))
	return nil
}

// runFinishedNote says what a successful run did, in counts.
func runFinishedNote(op string, c *runresult.Changes) string {
	if c == nil {
		return op + " succeeded"
	}
	return fmt.Sprintf("%s succeeded: %d added, %d changed, %d destroyed", op, c.Add, c.Change, c.Destroy)
}

// heldNote says what a held plan would do, in counts.
func heldNote(op string, p *runresult.PlanSummary) string {
	if p == nil {
		return op + " held: its plan waits for approval"
	}
	return fmt.Sprintf("%s held: its plan (%d to create, %d to update, %d to replace, %d to delete) deletes or replaces resources and waits for approval",
		op, p.Create, p.Update, p.Replace, p.Delete)
}

// runOp is the whole procedure: preflight, prepare, runtime version, init, the op's steps,
// and saving a state the runtime could not save.
func (r *run) runOp(ctx context.Context, environ []string) *failure {
	if err := r.o.preflight(); err != nil {
		return &failure{kind: runresult.KindImageLayout, step: "preflight", summary: err.Error()}
	}
	if err := r.prepare(environ); err != nil {
		return &failure{kind: runresult.KindStep, step: "prepare", summary: r.red.String(err.Error())}
	}
	if err := r.setupRuntime(ctx); err != nil {
		if ctx.Err() != nil {
			return &failure{kind: runresult.KindInterrupted, step: "version", summary: "stopped by a signal before the first step"}
		}
		return &failure{kind: runresult.KindImageLayout, step: "version", summary: r.red.String(err.Error())}
	}
	if f := r.setupEncryption(ctx); f != nil {
		return f
	}
	if f := r.init(ctx); f != nil {
		return f
	}
	f := r.opSteps(ctx)
	if f != nil && (f.kind == runresult.KindStep || f.kind == runresult.KindInterrupted) {
		f = r.saveErroredState(ctx, f)
	}
	return f
}

func (r *run) prepare(environ []string) error {
	o := r.o
	if err := os.MkdirAll(o.workdir, 0o700); err != nil {
		return fmt.Errorf("runner: create work directory: %w", err)
	}
	if err := o.collectSecrets(r.red, environ); err != nil {
		return err
	}
	root, err := o.prepareWorkdir()
	if err != nil {
		return err
	}
	r.root = root
	r.env = o.childEnv(environ)
	// An approved saved plan that cannot be read is no reason to stop before planning: the
	// apply then applies nothing and reports its new plan for approval (applyApproved).
	r.approved, r.approvedErr = o.assembleSavedPlan()
	if o.op == contract.OpRestore {
		if r.restore, err = o.assembleRestore(); err != nil {
			return err
		}
	}
	return nil
}

// setupRuntime configures terraform-exec and reads the runtime version; a runtime that cannot
// report its version breaks the image contract.
func (r *run) setupRuntime(ctx context.Context) error {
	tf, err := tfexec.NewTerraform(r.root, r.o.bin)
	if err != nil {
		return fmt.Errorf("runner: use runtime %s: %w", r.o.bin, err)
	}
	if err := tf.SetEnv(r.env); err != nil {
		return fmt.Errorf("runner: set runtime environment: %w", err)
	}
	// version -json is for the runner, not the log.
	tf.SetStdout(io.Discard)
	tf.SetStderr(r.stderr)
	// On cancellation terraform-exec sends the runtime SIGINT (it stops gracefully, saves
	// state and releases the lock) and kills it only after this delay; what remains of
	// --stop-timeout is for pushing an errored state and writing the result.
	if err := tf.SetWaitDelay(r.o.childGrace()); err != nil {
		return fmt.Errorf("runner: set stop grace: %w", err)
	}
	r.tf = tf
	v, _, err := tf.Version(ctx, true)
	if err != nil {
		return fmt.Errorf("runner: read runtime version (%s version -json): %w", r.o.bin, err)
	}
	tf.SetStdout(r.stdout)
	r.res.Runtime = v.String()
	r.logf("runtime %s version %s", r.o.bin, v)
	return nil
}

// childGrace is how long the runtime may take to stop after SIGINT: the stop timeout less a
// reserve (a third, at most a minute) for saving an errored state and writing the result.
func (o *options) childGrace() time.Duration {
	reserve := min(o.stopTimeout/3, time.Minute)
	return o.stopTimeout - reserve
}

// init runs init with the backend settings and, when asked, removes a stale lock.
func (r *run) init(ctx context.Context) *failure {
	opts := []tfexec.InitOption{tfexec.Upgrade(false)}
	for _, kv := range r.o.backendConfig {
		opts = append(opts, tfexec.BackendConfig(kv))
	}
	if err := r.step(ctx, "init", false, func(ctx context.Context) error { return r.tf.Init(ctx, opts...) }); err != nil {
		return r.stepFailure(ctx, "init", err)
	}
	if r.o.forceUnlock == "" {
		return nil
	}
	err := r.step(ctx, "force-unlock", false, func(ctx context.Context) error { return r.tf.ForceUnlock(ctx, r.o.forceUnlock) })
	if err == nil {
		return nil
	}
	// The lock may be gone already (its holder finished) or taken by someone else since the
	// controller looked; neither is ours to remove, and the next step waits for the lock.
	if out := r.tail.String() + err.Error(); ctx.Err() == nil && (strings.Contains(out, "already unlocked") || strings.Contains(out, "does not match existing lock")) {
		r.logf("lock %s is no longer held as the controller saw it; continuing", r.o.forceUnlock)
		return nil
	}
	return r.stepFailure(ctx, "force-unlock", err)
}
