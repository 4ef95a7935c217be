package runner

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/capx-io/capx/internal/captf/runresult"
)

// saveErroredState handles the state the runtime wrote to errored.tfstate because it could not
// save it to the backend (a state grown past what one Secret holds, an API server that went
// away): it pushes it with `state push` (no -force, so it never overwrites a newer state) and
// records the file's size and the push's outcome in the result. When the push fails too, what
// the step created is recorded nowhere the next run would read, so the run's failure becomes
// state-not-persisted, which the controller never retries. It runs even after a stop request,
// on a context of its own bounded by what is left of --stop-timeout.
func (r *run) saveErroredState(ctx context.Context, f *failure) *failure {
	path := filepath.Join(r.root, erroredState)
	st, err := os.Stat(path)
	if err != nil {
		return f
	}
	es := &runresult.ErroredState{Bytes: st.Size(), PushExitCode: -1}
	es.CompressedBytes, _ = compressedSize(path)
	r.res.ErroredState = es

	budget := r.o.stopTimeout
	r.stopMu.Lock()
	if !r.stoppedAt.IsZero() {
		budget -= time.Since(r.stoppedAt)
	}
	r.stopMu.Unlock()
	if budget <= 0 {
		r.logf("no time left to push %s", erroredState)
		es.PushError = "no time was left of --stop-timeout to push it"
		return r.notPersisted(f, es)
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
	defer cancel()
	r.logf("pushing %s (%d bytes, %d compressed) left by the failed step", erroredState, es.Bytes, es.CompressedBytes)
	err = r.step(pctx, "push-errored-state", false, func(ctx context.Context) error {
		return r.tf.StatePush(ctx, path, tfexec.Lock(true), tfexec.LockTimeout(r.o.lockTimeout.String()))
	})
	es.PushExitCode = exitCode(err)
	if err == nil {
		r.logf("pushed %s: the backend holds the state the failed step left", erroredState)
		return f
	}
	out := r.tail.String()
	if out == "" {
		out = err.Error()
	}
	es.PushError = r.red.String(errorBlock(boxDrawing.Replace(r.red.String(out))))
	r.logf("could not push %s (exit code %d); the runtime's output above says why", erroredState, es.PushExitCode)
	return r.notPersisted(f, es)
}

// notPersisted turns the step's failure into state-not-persisted: what happened, in what
// size, then the step's own first error.
func (r *run) notPersisted(f *failure, es *runresult.ErroredState) *failure {
	why := "the backend refused it"
	if es.TooLarge() {
		why = fmt.Sprintf("it is %s compressed and a state Secret holds at most %s", mib(es.CompressedBytes), mib(runresult.SecretDataLimit))
	}
	summary := fmt.Sprintf("the state after step %s (%s, %s compressed) could not be saved: %s; the runner's push failed too (exit code %d). "+
		"What the step created is recorded only in that state: do not re-run. %s",
		f.step, mib(es.Bytes), mib(es.CompressedBytes), why, es.PushExitCode, f.summary)
	return &failure{kind: runresult.KindStateNotPersisted, step: f.step, summary: runresult.Head(summary, runresult.MaxSummaryBytes)}
}

// boxDrawing drops the frame OpenTofu draws around diagnostics of commands run without
// -no-color (state push).
var boxDrawing = strings.NewReplacer("│ ", "", "│", "", "╷", "", "╵", "")

// mib formats a byte count in MiB with two decimals.
func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

// compressedSize is the file's size gzip-compressed, as the kubernetes backend stores it.
func compressedSize(path string) (int64, error) {
	in, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	var n countWriter
	zw := gzip.NewWriter(&n)
	if _, err := io.Copy(zw, in); err != nil {
		return 0, err
	}
	if err := zw.Close(); err != nil {
		return 0, err
	}
	return int64(n), nil
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}
