// Package runresult is the result document a CAPTF runner writes to its Pod's termination
// message and the controller reads back. The kubelet keeps at most 4096 bytes of a termination
// message, so Encode bounds the document (truncating lists and texts deterministically) and
// Decode refuses anything larger, malformed or from another version instead of guessing.
package runresult

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/capx-io/capx/internal/captf/contract"
)

// Version is the version of the result document this package writes and accepts.
const Version = 1

// Size limits of the document.
const (
	// MaxEncodedSize is what Encode keeps the document under: well below the kubelet's 4096-byte
	// termination-message limit so nothing is ever cut off mid-document.
	MaxEncodedSize = 3072
	// MaxDecodeSize is the most Decode reads: the kubelet never reports more.
	MaxDecodeSize = 4096
	// MaxSummaryBytes bounds Error.Summary (the redacted tail of a step's error output).
	MaxSummaryBytes = 512
	// MaxPlanResources bounds PlanSummary.Resources.
	MaxPlanResources = 50
	// MaxDriftAddresses bounds Drift.Addresses.
	MaxDriftAddresses = 20
	// MaxSteps bounds Steps; no operation runs more.
	MaxSteps = 16
	// MaxTextBytes bounds every other string (an address, a step name, a version).
	MaxTextBytes = 256
)

// Error kinds. Every failure is exactly one of these, and each has one meaning for the controller.
const (
	// KindUsage: the runner was called with invalid flags (exit code 2); a controller bug.
	KindUsage = "usage"
	// KindImageLayout: the module image breaks the image contract (no module files, no executable
	// runtime, a runtime that cannot report its version).
	KindImageLayout = "image-layout"
	// KindStep: a runtime step (or the runner's own preparation, step "prepare") failed.
	KindStep = "step"
	// KindInterrupted: the runner was stopped by SIGTERM/SIGINT; not a module failure.
	KindInterrupted = "interrupted"
	// KindBlocked: the destructive-plan guard stopped an apply before it changed anything and
	// stored its plan for approval. A held plan is not a failure: the runner exits 0 (Held).
	KindBlocked = "blocked"
	// KindPlanChanged: an approved apply planned something other than the approved plan.
	KindPlanChanged = "plan-changed"
	// KindStateNotPersisted: a step that writes state failed to save it to the backend and the
	// runner's push of errored.tfstate failed too: what the step created or changed is recorded
	// only in that errored state (ErroredState says where a copy is kept). Never retry: a
	// second run would create those resources again.
	KindStateNotPersisted = "state-not-persisted"
)

var errorKinds = map[string]bool{
	KindUsage: true, KindImageLayout: true, KindStep: true, KindInterrupted: true, KindBlocked: true,
	KindPlanChanged: true, KindStateNotPersisted: true,
}

var ops = map[string]bool{
	contract.OpPlan: true, contract.OpApply: true, contract.OpDestroy: true, contract.OpRefresh: true,
	contract.OpDrift: true, contract.OpRestore: true,
}

// Result is what one runner invocation did.
type Result struct {
	// Version is the document version (Version).
	Version int `json:"version"`
	// Op is the operation: plan, apply, destroy, refresh, drift or restore. Empty only when the
	// flags could not be parsed far enough to know it.
	Op string `json:"op,omitempty"`
	// Image is the module image the controller said it started (--image), for the record.
	Image string `json:"image,omitempty"`
	// Runtime is the version the runtime binary reported, e.g. "1.12.6".
	Runtime string `json:"runtime,omitempty"`
	// Steps are the runtime steps in the order they ran.
	Steps []Step `json:"steps,omitempty"`
	// Changes are the resource counts from the final apply or destroy summary line.
	Changes *Changes `json:"changes,omitempty"`
	// Drift is set by a drift operation.
	Drift *Drift `json:"drift,omitempty"`
	// Plan summarises the plan of a plan operation and of a guarded or approved apply.
	Plan *PlanSummary `json:"plan,omitempty"`
	// PlanHash is planhash.Empty when Plan changes no resource (it needs no approval); otherwise
	// empty: the manager hashes a plan itself, from the saved plan the Job stored.
	PlanHash string `json:"planHash,omitempty"`
	// Destructive reports that Plan deletes or replaces something.
	Destructive bool `json:"destructive,omitempty"`
	// ErroredState is set when the runtime left errored.tfstate (it could not save the state to
	// the backend): its size and what became of the runner's push.
	ErroredState *ErroredState `json:"erroredState,omitempty"`
	// Error is set when the operation did not succeed.
	Error *Error `json:"error,omitempty"`
}

// ErroredState is a state the runtime could not save to the backend and left in
// errored.tfstate, and what the runner did with it.
type ErroredState struct {
	// Bytes is the size of errored.tfstate (state JSON).
	Bytes int64 `json:"bytes"`
	// CompressedBytes is its size gzip-compressed, as the kubernetes backend stores it in a
	// Secret's data (one Secret holds at most 1 MiB).
	CompressedBytes int64 `json:"compressedBytes"`
	// PushExitCode is the exit code of the runner's push-errored-state step: 0 when the state
	// was saved after all, -1 when the push could not run.
	PushExitCode int `json:"pushExitCode"`
	// PushError is the first error the push reported, redacted and bounded; empty when it
	// succeeded.
	PushError string `json:"pushError,omitempty"`
	// Kept names the first Secret of the copy the runner kept (captf-errored-state-...), empty
	// when none was kept; KeepError says why not.
	Kept      string `json:"kept,omitempty"`
	KeepError string `json:"keepError,omitempty"`
}

// SecretDataLimit is the most data one Kubernetes Secret holds (the API server refuses more).
const SecretDataLimit = 1 << 20

// TooLarge reports that the errored state cannot fit the one Secret OpenTofu's kubernetes
// backend writes.
func (e *ErroredState) TooLarge() bool { return e != nil && e.CompressedBytes > SecretDataLimit }

// Step is one runtime command.
type Step struct {
	// Name is the step: init, force-unlock, validate, plan, show, apply, destroy, refresh,
	// state-pull, state-push, state-list or push-errored-state.
	Name string `json:"name"`
	// ExitCode is the command's exit code; -1 when it was killed or could not start.
	ExitCode int `json:"exitCode"`
	// DurationMS is how long the step ran, in milliseconds.
	DurationMS int64 `json:"durationMs"`
}

// Changes counts what an apply or destroy did.
type Changes struct {
	Add     int `json:"add"`
	Change  int `json:"change"`
	Destroy int `json:"destroy"`
}

// Drift is what a drift check found: the changes an apply would make to undo it.
type Drift struct {
	// Resources counts resource instances that differ from the configuration.
	Resources int `json:"resources"`
	// Outputs counts outputs that would change.
	Outputs int `json:"outputs,omitempty"`
	// Addresses are the first MaxDriftAddresses drifted resource addresses, sorted.
	Addresses []string `json:"addresses,omitempty"`
	// Truncated reports that Addresses does not list every drifted resource.
	Truncated bool `json:"truncated,omitempty"`
}

// PlanSummary is the review summary of a plan: counts and labelled addresses, never values.
type PlanSummary struct {
	Create        int `json:"create"`
	Update        int `json:"update"`
	Replace       int `json:"replace"`
	Delete        int `json:"delete"`
	OutputChanges int `json:"outputChanges"`
	// Resources are "<address> (<labels>)" entries, sorted, at most MaxPlanResources.
	Resources []string `json:"resources,omitempty"`
	// Truncated reports that Resources does not list every change.
	Truncated bool `json:"truncated,omitempty"`
}

// Error says why an operation failed.
type Error struct {
	// Kind is one of the Kind constants.
	Kind string `json:"kind"`
	// Step is the step that failed or was running; "prepare" for the runner's own preparation.
	Step string `json:"step,omitempty"`
	// Summary is a redacted, bounded text: the tail of the step's error output or the runner's
	// own explanation.
	Summary string `json:"summary,omitempty"`
}

// Encode returns the document as JSON no larger than MaxEncodedSize. Texts are cut to their
// bounds, then, while the document is too large, plan resources and then drift addresses are
// dropped from the end (setting Truncated) and finally the error summary is shortened from the
// front (it is a tail). The same input always gives the same output.
func Encode(r Result) ([]byte, error) {
	r = bounded(r)
	for {
		b, err := marshal(r)
		if err != nil {
			return nil, fmt.Errorf("runresult: encode: %w", err)
		}
		if len(b) <= MaxEncodedSize {
			return b, nil
		}
		over := len(b) - MaxEncodedSize
		switch {
		case r.Plan != nil && len(r.Plan.Resources) > 0:
			r.Plan.Resources = r.Plan.Resources[:len(r.Plan.Resources)-1]
			r.Plan.Truncated = true
		case r.Drift != nil && len(r.Drift.Addresses) > 0:
			r.Drift.Addresses = r.Drift.Addresses[:len(r.Drift.Addresses)-1]
			r.Drift.Truncated = true
		case r.Error != nil && r.Error.Summary != "":
			r.Error.Summary = Tail(r.Error.Summary, len(r.Error.Summary)-over-8)
		case len(r.Steps) > 0:
			r.Steps = r.Steps[:len(r.Steps)-1]
		default:
			return nil, fmt.Errorf("runresult: encode: document of %d bytes cannot be cut below %d", len(b), MaxEncodedSize)
		}
	}
}

// bounded copies r with every list and text cut to its bound, so Encode never aliases the
// caller's slices.
func bounded(r Result) Result {
	r.Version = Version
	r.Op = Head(r.Op, MaxTextBytes)
	r.Image = Head(r.Image, MaxTextBytes)
	r.Runtime = Head(r.Runtime, MaxTextBytes)
	steps := r.Steps
	if len(steps) > MaxSteps {
		steps = steps[:MaxSteps]
	}
	r.Steps = nil
	for _, s := range steps {
		s.Name = Head(s.Name, MaxTextBytes)
		r.Steps = append(r.Steps, s)
	}
	if r.Plan != nil {
		p := *r.Plan
		p.Resources, p.Truncated = boundList(p.Resources, MaxPlanResources, p.Truncated)
		r.Plan = &p
	}
	if r.Drift != nil {
		d := *r.Drift
		d.Addresses, d.Truncated = boundList(d.Addresses, MaxDriftAddresses, d.Truncated)
		r.Drift = &d
	}
	if r.Changes != nil {
		c := *r.Changes
		r.Changes = &c
	}
	if r.ErroredState != nil {
		e := *r.ErroredState
		e.PushError = Head(e.PushError, MaxTextBytes)
		e.Kept = Head(e.Kept, MaxTextBytes)
		e.KeepError = Head(e.KeepError, MaxTextBytes)
		r.ErroredState = &e
	}
	r.PlanHash = Head(r.PlanHash, MaxTextBytes)
	if r.Error != nil {
		e := *r.Error
		e.Step = Head(e.Step, MaxTextBytes)
		e.Summary = Tail(e.Summary, MaxSummaryBytes)
		r.Error = &e
	}
	return r
}

func boundList(in []string, limit int, truncated bool) ([]string, bool) {
	if len(in) > limit {
		in, truncated = in[:limit], true
	}
	out := make([]string, 0, len(in))
	for _, s := range in {
		out = append(out, Head(s, MaxTextBytes))
	}
	if len(out) == 0 {
		out = nil
	}
	return out, truncated
}

// marshal encodes without HTML escaping: addresses like a["<x>"] stay short and readable.
func marshal(r Result) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Head returns at most n bytes from the start of s, cut at a character boundary.
func Head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Tail returns at most n bytes from the end of s, cut at a character boundary.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// ErrEmpty means there was no result document at all: the runner never got to write one (it
// was killed, or the container never ran the runner).
var ErrEmpty = errors.New("runresult: empty termination message: the runner wrote no result")

// Decode parses a termination message strictly: one JSON object of this version, no unknown
// fields, no trailing data, every list and text within its bound and every enum known. Errors
// never quote the message, which a module could have written.
func Decode(msg []byte) (Result, error) {
	if len(bytes.TrimSpace(msg)) == 0 {
		return Result{}, ErrEmpty
	}
	if len(msg) > MaxDecodeSize {
		return Result{}, fmt.Errorf("runresult: termination message is %d bytes, more than the %d a result may have", len(msg), MaxDecodeSize)
	}
	dec := json.NewDecoder(bytes.NewReader(msg))
	dec.DisallowUnknownFields()
	var r Result
	if err := dec.Decode(&r); err != nil {
		return Result{}, fmt.Errorf("runresult: termination message is not a result document: %w", decodeError(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Result{}, errors.New("runresult: termination message has data after the result document")
	}
	if err := r.validate(); err != nil {
		return Result{}, fmt.Errorf("runresult: invalid result document: %w", err)
	}
	return r, nil
}

// decodeError drops the parts of encoding/json errors that could echo message content (field
// names are bounded by the schema, values are not).
func decodeError(err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Errorf("invalid JSON at byte %d", syn.Offset)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		return fmt.Errorf("field %q has a JSON %s, want %s", Head(typ.Field, 64), typ.Value, typ.Type)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errors.New("truncated JSON")
	}
	if strings.HasPrefix(err.Error(), "json: unknown field ") {
		return errors.New("unknown field (written by a different runner version?)")
	}
	return errors.New("malformed JSON")
}

func (r Result) validate() error {
	if r.Version != Version {
		return fmt.Errorf("version %d, this controller reads version %d", r.Version, Version)
	}
	if r.Op != "" && !ops[r.Op] {
		return errors.New("unknown op")
	}
	if r.Op == "" && (r.Error == nil || r.Error.Kind != KindUsage) {
		return errors.New("op is missing")
	}
	if len(r.Image) > MaxTextBytes || len(r.Runtime) > MaxTextBytes || len(r.PlanHash) > MaxTextBytes {
		return errors.New("a text field is longer than allowed")
	}
	if len(r.Steps) > MaxSteps {
		return fmt.Errorf("%d steps, at most %d allowed", len(r.Steps), MaxSteps)
	}
	for _, s := range r.Steps {
		if s.Name == "" || len(s.Name) > MaxTextBytes || s.ExitCode < -1 || s.DurationMS < 0 {
			return errors.New("invalid step")
		}
	}
	if c := r.Changes; c != nil && (c.Add < 0 || c.Change < 0 || c.Destroy < 0) {
		return errors.New("negative change count")
	}
	if d := r.Drift; d != nil {
		if d.Resources < 0 || d.Outputs < 0 || len(d.Addresses) > MaxDriftAddresses || len(d.Addresses) > d.Resources {
			return errors.New("invalid drift summary")
		}
		if err := texts(d.Addresses); err != nil {
			return err
		}
	}
	if p := r.Plan; p != nil {
		if p.Create < 0 || p.Update < 0 || p.Replace < 0 || p.Delete < 0 || p.OutputChanges < 0 ||
			len(p.Resources) > MaxPlanResources {
			return errors.New("invalid plan summary")
		}
		if err := texts(p.Resources); err != nil {
			return err
		}
	}
	if es := r.ErroredState; es != nil {
		if es.Bytes < 0 || es.CompressedBytes < 0 || es.PushExitCode < -1 ||
			len(es.PushError) > MaxTextBytes || len(es.Kept) > MaxTextBytes || len(es.KeepError) > MaxTextBytes {
			return errors.New("invalid errored state")
		}
	}
	if r.PlanHash != "" && !strings.HasPrefix(r.PlanHash, "p2:") {
		return errors.New("plan hash is not a p2: fingerprint")
	}
	if e := r.Error; e != nil {
		if !errorKinds[e.Kind] {
			return errors.New("unknown error kind")
		}
		if len(e.Step) > MaxTextBytes || len(e.Summary) > MaxSummaryBytes {
			return errors.New("error text longer than allowed")
		}
	}
	return nil
}

func texts(list []string) error {
	for _, s := range list {
		if s == "" || len(s) > MaxTextBytes {
			return errors.New("empty or overlong list entry")
		}
	}
	return nil
}

// Redact returns a copy of r with redact applied to every text a module or its runtime could
// have put a value into: the error summary, plan resource entries and drift addresses. The
// runner passes its redactor, so the result is redacted with the same secrets as the log.
// Entries that redact to nothing are dropped, since Decode refuses empty entries.
func (r Result) Redact(redact func(string) string) Result {
	list := func(in []string) []string {
		var out []string
		for _, s := range in {
			if s = redact(s); s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	if r.Plan != nil {
		p := *r.Plan
		p.Resources = list(p.Resources)
		r.Plan = &p
	}
	if r.Drift != nil {
		d := *r.Drift
		d.Addresses = list(d.Addresses)
		r.Drift = &d
	}
	if r.Error != nil {
		e := *r.Error
		e.Summary = redact(e.Summary)
		r.Error = &e
	}
	if r.ErroredState != nil {
		e := *r.ErroredState
		e.PushError, e.KeepError = redact(e.PushError), redact(e.KeepError)
		r.ErroredState = &e
	}
	return r
}

// OK reports whether the runner exits 0 for this result: the operation succeeded, or its plan
// is held for approval (Held).
func (r Result) OK() bool { return r.Error == nil || r.Held() }

// Held reports an apply the destructive-plan guard stopped, its plan stored for approval: it
// changed nothing, waits for a decision, and is no failure (no failed Job, no Warning).
func (r Result) Held() bool { return r.Error != nil && r.Error.Kind == KindBlocked }
