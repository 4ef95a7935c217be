package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/capx-io/capx/internal/captf/runresult"
)

// stepError is a step failure the runner determines itself (an invalid configuration reported
// by validate -json, an empty state after restore), with the exit code the step records.
type stepError struct {
	code    int
	summary string
}

func (e *stepError) Error() string { return e.summary }

// exitCode is the exit code a step records: the process's, -1 when it was killed by a signal
// or never started.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var se *stepError
	if errors.As(err, &se) {
		return se.code
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// contentSteps print state or plan content on stdout (every value, sensitive or not, and
// secrets the redactor cannot know): their stdout never reaches the log, whoever calls them.
var contentSteps = map[string]bool{"validate": true, "show": true, "state-pull": true}

// step runs one runtime command: it logs the step, streams its output (stderr only when quiet
// or when the step is one of contentSteps), and records the exit code and duration in the
// result.
func (r *run) step(ctx context.Context, name string, quiet bool, fn func(ctx context.Context) error) error {
	r.tail.reset()
	r.counts.reset()
	if err := ctx.Err(); err != nil {
		return err
	}
	if quiet || contentSteps[name] {
		r.tf.SetStdout(io.Discard)
		defer r.tf.SetStdout(r.stdout)
	}
	r.current.Store(name)
	r.logf("step %s started", name)
	start := time.Now()
	err := fn(ctx)
	d := time.Since(start)
	_ = r.stdout.Flush()
	_ = r.stderr.Flush()
	code := exitCode(err)
	r.res.Steps = append(r.res.Steps, runresult.Step{Name: name, ExitCode: code, DurationMS: d.Milliseconds()})
	r.logf("step %s finished: exit code %d after %s", name, code, d.Round(time.Millisecond))
	if code == 0 {
		r.events.emit(ctx, corev1.EventTypeNormal, "StepSucceeded", fmt.Sprintf("step %s finished after %s", name, d.Round(time.Second)))
	} else {
		r.events.emit(ctx, corev1.EventTypeWarning, "StepFailed", fmt.Sprintf("step %s failed with exit code %d after %s", name, code, d.Round(time.Second)))
	}
	if c, ok := r.counts.found(); ok {
		r.res.Changes = &c
	}
	return err
}

// failure is why a run did not succeed; it becomes the result's error.
type failure struct {
	kind    string
	step    string
	summary string
}

func (f *failure) Error() string { return f.kind + " at " + f.step + ": " + f.summary }

// stepFailure classifies a failed step: interrupted when the run was signalled, else a step
// failure summarised by the redacted tail of what the step wrote to stderr.
func (r *run) stepFailure(ctx context.Context, name string, err error) *failure {
	summary := r.tail.String()
	var se *stepError
	if errors.As(err, &se) {
		summary = se.summary
	}
	if summary == "" {
		// terraform-exec's errors carry the raw stderr; only ever show them redacted.
		summary = err.Error()
	}
	// Redacted before and after the colour codes go: a secret split by one is whole after.
	summary = r.red.String(errorBlock(r.red.String(summary)))
	if ctx.Err() != nil {
		return &failure{kind: runresult.KindInterrupted, step: name, summary: runresult.Head("stopped by a signal: "+summary, runresult.MaxSummaryBytes)}
	}
	return &failure{kind: runresult.KindStep, step: name, summary: summary}
}

// ansiEscape matches the colour codes of commands terraform-exec runs without -no-color
// (state push).
var ansiEscape = regexp.MustCompile("\x1b\\[[0-9;]*m")

// errorBlock cuts a step's error output to the result's bound: the first "Error: " block (the
// cause; later blocks are consequences, such as OpenTofu's advice after a failed state save), up
// to the next one, else the tail.
func errorBlock(s string) string {
	s = strings.TrimSpace(ansiEscape.ReplaceAllString(s, ""))
	if i := strings.Index(s, "Error: "); i >= 0 {
		block := s[i:]
		if j := strings.Index(block[len("Error: "):], "\nError: "); j >= 0 {
			block = strings.TrimSpace(block[:len("Error: ")+j])
		}
		return runresult.Head(block, runresult.MaxSummaryBytes)
	}
	return runresult.Tail(s, runresult.MaxSummaryBytes)
}

// syncWriter serialises the runtime's stdout and stderr streams and the runner's own lines
// into the pod log.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// tailBuffer keeps the first and the last bytes of a step's (already redacted) stderr for the
// result: the first error block is the cause, the tail what a step without one said last.
type tailBuffer struct {
	mu   sync.Mutex
	head []byte
	buf  []byte
	cut  bool // bytes between head and buf were dropped
}

const tailKeep = 4 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := min(tailKeep-len(t.head), len(p)); n > 0 {
		t.head = append(t.head, p[:n]...)
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailKeep {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailKeep:]...)
		t.cut = true
	}
	return len(p), nil
}

func (t *tailBuffer) reset() {
	t.mu.Lock()
	t.head, t.buf, t.cut = nil, nil, false
	t.mu.Unlock()
}

// String is the step's stderr when it was short, else its first bytes and its tail.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.cut {
		return string(t.buf)
	}
	return string(t.head) + "\n...\n" + string(t.buf)
}

// The final summary lines of apply and destroy, e.g. "Apply complete! Resources: 1 imported,
// 2 added, 0 changed, 1 destroyed." and "Destroy complete! Resources: 3 destroyed.", and the
// line each resource change prints once done ("module.role.x: Creation complete after 0s").
var (
	applySummary   = regexp.MustCompile(`complete! Resources: .*?(\d+) added, (\d+) changed, (\d+) destroyed`)
	destroySummary = regexp.MustCompile(`Destroy complete! Resources: (\d+) destroyed`)
	resourceDone   = regexp.MustCompile(`: (Creation|Modifications|Destruction) complete after `)
)

// countScanner finds the resource counts in a step's stdout, line by line: the summary line,
// else (a step that failed before printing one, such as an apply whose state could not be
// saved) the resource changes it completed, counted as the summary counts them (a replace once
// in add and once in destroy).
type countScanner struct {
	mu      sync.Mutex
	partial []byte
	changes runresult.Changes
	ok      bool
	done    runresult.Changes
	anyDone bool
}

func (c *countScanner) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			break
		}
		c.scan(c.partial[:i])
		c.partial = c.partial[i+1:]
	}
	if len(c.partial) > tailKeep {
		c.partial = nil
	}
	return len(p), nil
}

func (c *countScanner) scan(line []byte) {
	if m := applySummary.FindSubmatch(line); m != nil {
		c.changes = runresult.Changes{Add: atoi(m[1]), Change: atoi(m[2]), Destroy: atoi(m[3])}
		c.ok = true
	} else if m := destroySummary.FindSubmatch(line); m != nil {
		c.changes = runresult.Changes{Destroy: atoi(m[1])}
		c.ok = true
	} else if m := resourceDone.FindSubmatch(line); m != nil {
		switch string(m[1]) {
		case "Creation":
			c.done.Add++
		case "Modifications":
			c.done.Change++
		default:
			c.done.Destroy++
		}
		c.anyDone = true
	}
}

func (c *countScanner) reset() {
	c.mu.Lock()
	c.partial, c.ok, c.done, c.anyDone = nil, false, runresult.Changes{}, false
	c.mu.Unlock()
}

func (c *countScanner) found() (runresult.Changes, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.partial) > 0 {
		c.scan(c.partial)
		c.partial = nil
	}
	if !c.ok && c.anyDone {
		return c.done, true
	}
	return c.changes, c.ok
}

func atoi(b []byte) int {
	n, _ := strconv.Atoi(string(b))
	return n
}

// logf writes one of the runner's own lines, redacted like the runtime's output: errors it
// quotes (an API server's answer, a file name) may hold a secret.
func (r *run) logf(format string, args ...any) {
	fmt.Fprint(r.log, r.red.String(fmt.Sprintf("captf-runner: "+format+"\n", args...)))
}
