package vco

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Sentinel errors; every error a call returns wraps at most one of them. Test with errors.Is.
var (
	ErrBadRequest   = errors.New("bad request")
	ErrUnauthorized = errors.New("unauthorized")
	ErrForbidden    = errors.New("forbidden")
	ErrNotFound     = errors.New("not found")
	ErrConflict     = errors.New("conflict")
	ErrRateLimited  = errors.New("rate limited")
	// ErrServer is a 5xx the platform gave for a failed operation (e.g. a G8Error).
	ErrServer = errors.New("server error")
	// ErrUnavailable is transient: 502/503/504, a broken connection or a timed-out call. The
	// operation may or may not have happened; re-read before acting again.
	ErrUnavailable = errors.New("temporarily unavailable")
	// ErrAmbiguous means a lookup by name found several resources.
	ErrAmbiguous = errors.New("ambiguous name")
)

// APIError is an error answer of the API. Message is the API's own text, cleaned and bounded,
// or a summary of an answer that was not the API's (newAPIError).
type APIError struct {
	Operation  string
	Method     string
	Path       string // the path template, never the query string (which may hold a secret)
	StatusCode int
	Message    string
	// Fields holds per-argument validation errors, when the API gives them.
	Fields map[string]string
	// RetryAfter is the server's Retry-After on a 429.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "vco: %s (%s %s): %d %s", e.Operation, e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	for k, v := range e.Fields {
		fmt.Fprintf(&b, "; %s: %s", k, v)
	}
	return b.String()
}

// Unwrap maps the status to its sentinel.
func (e *APIError) Unwrap() error { return sentinelFor(e.StatusCode) }

func sentinelFor(status int) error {
	switch {
	case status == http.StatusUnauthorized:
		return ErrUnauthorized
	case status == http.StatusForbidden:
		return ErrForbidden
	case status == http.StatusNotFound:
		return ErrNotFound
	case status == http.StatusConflict || status == http.StatusPreconditionFailed:
		return ErrConflict
	case status == http.StatusTooManyRequests:
		return ErrRateLimited
	case status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
		return ErrUnavailable
	case status >= 500:
		return ErrServer
	case status >= 400:
		return ErrBadRequest
	}
	return nil
}

// jwtPattern finds anything shaped like a JWT, so an API message echoing a token cannot leak it.
var jwtPattern = regexp.MustCompile(`eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`)

// secretField finds a client secret an IAM or API answer echoes back: client_secret=...,
// "client_secret": "...", clientSecret: ...
var secretField = regexp.MustCompile(`(?i)(client_?secret"?\s*[:=]\s*"?)[^"&\s,;}]+`)

func redact(s string) string {
	s = jwtPattern.ReplaceAllString(s, "[redacted-jwt]")
	return secretField.ReplaceAllString(s, "${1}[redacted]")
}

// scrub removes known secrets (the credential's client secret and tokens) from the message and
// the field errors, keys included, and returns e.
func (e *APIError) scrub(secrets ...string) *APIError {
	clean := func(s string) string {
		for _, sec := range secrets {
			if len(sec) >= 4 {
				s = strings.ReplaceAll(s, sec, "[redacted]")
			}
		}
		return s
	}
	e.Message = clean(e.Message)
	if e.Fields != nil {
		fields := make(map[string]string, len(e.Fields))
		for k, v := range e.Fields {
			fields[clean(k)] = clean(v)
		}
		e.Fields = fields
	}
	return e
}

// Bounds of what an error answer may put in an error: the message, the number of field errors
// and each field's name and text. Errors end up in conditions, events and logs.
const (
	maxMessage    = 1024
	maxFields     = 10
	maxFieldKey   = 64
	maxFieldValue = 256
	// maxErrorBody is the most of an error answer that is read: the API's own are a few
	// hundred bytes, so more is not the API's and is only summarised.
	maxErrorBody = 64 << 10
)

// newAPIError keeps the API's own message, Flask-RESTX's {"message", "errors"}, cleaned and
// bounded. Anything else (an HTML page of a proxy, a body of another service, more than
// maxErrorBody bytes) is never repeated: the error says what it was and how long, so a
// credential pointing the client at some other host cannot have that host's answers shown in
// a condition. body holds at most maxErrorBody+1 bytes of the answer.
func newAPIError(o op, status int, body []byte, retryAfter time.Duration) *APIError {
	e := &APIError{Operation: o.name, Method: o.method, Path: o.path, StatusCode: status, RetryAfter: retryAfter}
	if len(body) > maxErrorBody {
		e.Message = fmt.Sprintf("the answer is not an API error: more than %d KiB of %s (not shown)", maxErrorBody>>10, sniff(body))
		return e
	}
	var parsed struct {
		Message json.RawMessage            `json:"message"`
		Errors  map[string]json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal(body, &parsed); err != nil || len(parsed.Message) == 0 || string(parsed.Message) == "null" {
		if len(bytes.TrimSpace(body)) == 0 {
			return e
		}
		e.Message = fmt.Sprintf("the answer is not an API error: %d bytes of %s (not shown)", len(body), sniff(body))
		return e
	}
	e.Message = clean(jsonText(parsed.Message), maxMessage)
	keys := make([]string, 0, len(parsed.Errors))
	for k := range parsed.Errors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i == maxFields {
			e.Message += fmt.Sprintf(" (%d more field errors not shown)", len(keys)-maxFields)
			break
		}
		v := clean(jsonText(parsed.Errors[k]), maxFieldValue)
		if secretField.MatchString(k + "=x") {
			v = "[redacted]" // the answer to a client_secret argument may repeat it
		}
		if e.Fields == nil {
			e.Fields = map[string]string{}
		}
		e.Fields[clean(k, maxFieldKey)] = v
	}
	return e
}

// jsonText is a JSON string's text, or any other JSON value compactly encoded.
func jsonText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return ""
	}
	return b.String()
}

// clean makes text fit for one line of a condition: known secret shapes redacted, control and
// direction-changing characters turned into spaces, spaces collapsed, at most limit bytes
// (cut on a character boundary).
func clean(s string, limit int) string {
	s = redact(strings.ToValidUTF8(s, " "))
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// sniff names what a body looks like, from net/http's fixed list of media types: never a
// word of the body itself.
func sniff(body []byte) string {
	t, _, _ := strings.Cut(http.DetectContentType(body), ";")
	return t
}

// unavailableError wraps a transport failure: the outcome of the call is unknown.
type unavailableError struct {
	op  op
	err error
}

func (e *unavailableError) Error() string {
	return fmt.Sprintf("vco: %s (%s %s): outcome unknown: %v", e.op.name, e.op.method, e.op.path, e.err)
}

func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.err} }

// IsTransient says whether retrying later may help: rate limits and unavailability.
func IsTransient(err error) bool {
	return errors.Is(err, ErrRateLimited) || errors.Is(err, ErrUnavailable)
}
