package runner

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	tfjson "github.com/hashicorp/terraform-json"
)

// Redacted replaces every secret in the pod log and the result.
const Redacted = "[redacted]"

// Secrets shorter than minSecretLen are not redacted: replacing every "abc" or "8080" in the
// log would hide more than it protects. true/false/null are never secrets worth a log.
const (
	minSecretLen = 4
	// minLineLen: the single lines of a multi-line secret (a PEM key) are redacted on their own
	// too, because a provisioner prints them with a prefix on each line; shorter lines such
	// as "}" or "-----" are too common to replace.
	minLineLen = 8
	// maxSecretBytes bounds one secret; a larger value (a whole kubeconfig) is still redacted
	// line by line.
	maxSecretBytes = 256 << 10
)

// redactor knows the secret values of a run and removes them from text. Secrets may be added
// while output is streaming (the plan's sensitive values are known only after show).
type redactor struct {
	mu sync.RWMutex
	// byFirst lists the secrets by first byte, longest first, so the leftmost-longest match
	// wins and a scan position checks only a few candidates.
	byFirst map[byte][][]byte
	seen    map[string]bool
}

// newRedactor returns a redactor without secrets.
func newRedactor() *redactor {
	return &redactor{byFirst: map[byte][][]byte{}, seen: map[string]bool{}}
}

// Add registers a secret value, with the forms it may appear in: as is, JSON-escaped, line by
// line when it has several lines, and decoded when it is base64 (bootstrap data is passed
// encoded, a module may print it decoded). Surrounding whitespace (the newline ending a
// credential file) is not part of the secret: redacting it would join log lines.
func (r *redactor) Add(secret string) {
	secret = strings.TrimSpace(secret)
	r.add(secret)
	if b, err := json.Marshal(secret); err == nil {
		r.add(string(b[1 : len(b)-1]))
	}
	if strings.Contains(secret, "\n") {
		for line := range strings.SplitSeq(secret, "\n") {
			if line = strings.TrimSpace(line); len(line) >= minLineLen {
				r.add(line)
			}
		}
	}
	if len(secret) >= minLineLen && len(secret)%4 == 0 {
		if dec, err := base64.StdEncoding.DecodeString(secret); err == nil && utf8.Valid(dec) && !strings.Contains(string(dec), secret) {
			r.Add(string(dec))
		}
	}
}

func (r *redactor) add(s string) {
	if len(s) < minSecretLen || len(s) > maxSecretBytes || s == "true" || s == "false" || s == "null" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[s] {
		return
	}
	r.seen[s] = true
	list := append(r.byFirst[s[0]], []byte(s))
	sort.SliceStable(list, func(i, j int) bool { return len(list[i]) > len(list[j]) })
	r.byFirst[s[0]] = list
}

// AddValue registers every leaf of a JSON value (strings, and numbers by their text).
func (r *redactor) AddValue(v any) {
	switch v := v.(type) {
	case string:
		r.Add(v)
	case json.Number:
		r.Add(v.String())
	case map[string]any:
		for _, x := range v {
			r.AddValue(x)
		}
	case []any:
		for _, x := range v {
			r.AddValue(x)
		}
	}
}

// AddSensitive registers the values a plan marks sensitive in its resource changes, before and
// after. Output changes are skipped: the generated root re-exports every contract output as
// sensitive only so modules may mark outputs sensitive, which would otherwise redact every
// endpoint and address from the log.
func (r *redactor) AddSensitive(plan *tfjson.Plan) {
	if plan == nil {
		return
	}
	for _, rc := range plan.ResourceChanges {
		if rc == nil || rc.Change == nil {
			continue
		}
		r.addMarked(rc.Change.Before, rc.Change.BeforeSensitive)
		r.addMarked(rc.Change.After, rc.Change.AfterSensitive)
	}
}

func (r *redactor) addMarked(v, marker any) {
	switch m := marker.(type) {
	case bool:
		if m {
			r.AddValue(v)
		}
	case map[string]any:
		if obj, ok := v.(map[string]any); ok {
			for k, sub := range m {
				r.addMarked(obj[k], sub)
			}
		}
	case []any:
		if list, ok := v.([]any); ok {
			for i, sub := range m {
				if i < len(list) {
					r.addMarked(list[i], sub)
				}
			}
		}
	}
}

// String returns s with every secret replaced.
func (r *redactor) String(s string) string {
	out, _ := r.redact([]byte(s), true)
	return string(out)
}

// redact replaces secrets in buf. Unless final, it stops before a tail of buf that could be
// the start of a secret continuing in the next write, and returns that tail as rest: this is
// what makes redaction hold across write boundaries.
func (r *redactor) redact(buf []byte, final bool) (out, rest []byte) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out = make([]byte, 0, len(buf))
	start := 0
	for i := 0; i < len(buf); {
		matched := 0
		for _, s := range r.byFirst[buf[i]] {
			if len(buf)-i >= len(s) {
				if bytes.Equal(buf[i:i+len(s)], s) {
					matched = len(s)
					break
				}
			} else if !final && bytes.HasPrefix(s, buf[i:]) {
				// A longer secret may still match here: decide when more bytes arrive.
				return append(out, buf[start:i]...), buf[i:]
			}
		}
		if matched == 0 {
			i++
			continue
		}
		out = append(append(out, buf[start:i]...), Redacted...)
		i += matched
		start = i
	}
	return append(out, buf[start:]...), nil
}

// redactWriter redacts a stream for one writer. It holds back only a tail that may be the start
// of a secret; Flush writes that tail out (redacted as far as it can be) when the stream ends.
type redactWriter struct {
	r       *redactor
	w       io.Writer
	mu      sync.Mutex
	pending []byte
}

func (r *redactor) writer(w io.Writer) *redactWriter { return &redactWriter{r: r, w: w} }

func (rw *redactWriter) Write(p []byte) (int, error) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	out, rest := rw.r.redact(append(rw.pending, p...), false)
	rw.pending = append([]byte(nil), rest...)
	if len(out) > 0 {
		if _, err := rw.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes what was held back.
func (rw *redactWriter) Flush() error {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	out, _ := rw.r.redact(rw.pending, true)
	rw.pending = nil
	if len(out) == 0 {
		return nil
	}
	_, err := rw.w.Write(out)
	return err
}
