package vco

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
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

// APIError is an error answer of the API. Message is the API's own text.
type APIError struct {
	Operation  string
	Method     string
	Path       string // the path template, never the query string (which may hold user_data)
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

const maxMessage = 2048

// newAPIError keeps the API's message: Flask-RESTX's {"message", "errors"} when the body has
// it, the raw text otherwise (an nginx page, say), trimmed and redacted.
func newAPIError(o op, status int, body []byte, retryAfter time.Duration) *APIError {
	e := &APIError{Operation: o.name, Method: o.method, Path: o.path, StatusCode: status, RetryAfter: retryAfter}
	var parsed struct {
		Message any               `json:"message"`
		Errors  map[string]string `json:"errors"`
	}
	if json.Unmarshal(body, &parsed) == nil && parsed.Message != nil {
		e.Message = fmt.Sprint(parsed.Message)
		if len(parsed.Errors) > 0 {
			e.Fields = map[string]string{}
			for k, v := range parsed.Errors {
				if secretField.MatchString(k + "=x") {
					v = "[redacted]" // the answer to a client_secret argument may repeat it
				}
				e.Fields[redact(k)] = redact(v)
			}
		}
	} else {
		e.Message = strings.TrimSpace(string(body))
	}
	if len(e.Message) > maxMessage {
		e.Message = e.Message[:maxMessage] + "…"
	}
	e.Message = redact(e.Message)
	return e
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
