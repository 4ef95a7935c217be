package vcosim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

const (
	apiBase = "/api/1"
	iamBase = "/iam"
	simBase = "/sim/v1"
)

// Route describes one route the simulator serves, for the conformance test: the path is a
// swagger template relative to Base, Query lists every query parameter the handler reads.
type Route struct {
	Method string
	Base   string // "/api/1", "/iam" or "/sim/v1"
	Path   string
	Query  []string
	Body   bool
}

// Key is "METHOD /path" relative to the base, the form swagger operations use.
func (r Route) Key() string { return r.Method + " " + r.Path }

// route is a Route plus how to authorise and serve it.
type route struct {
	Route
	status int                        // success status; 0 means 200
	auth   authMode                   // who may call it at all (grants are checked in handlers)
	handle func(c *call) (any, error) // returns the JSON body (nil writes none)
}

func (r *route) fullPath() string { return r.Base + r.Path }

type authMode int

const (
	authBearer   authMode = iota // a valid simulator JWT
	authNone                     // IAM endpoints authenticate themselves
	authOperator                 // a valid JWT of a VCO operator
)

// Routes lists every route the simulator serves.
func (s *Sim) Routes() []Route {
	out := make([]Route, 0, len(s.routes))
	for _, r := range s.routes {
		out = append(out, r.Route)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Base+out[i].Path != out[j].Base+out[j].Path {
			return out[i].Base+out[i].Path < out[j].Base+out[j].Path
		}
		return out[i].Method < out[j].Method
	})
	return out
}

// apiError is an error answer: Flask-RESTX's {"message": ...}, plus "errors" for validation.
type apiError struct {
	status     int
	message    string
	fields     map[string]string
	retryAfter time.Duration
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s", e.status, e.message) }

func errf(status int, format string, args ...any) error {
	return &apiError{status: status, message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error { return errf(http.StatusNotFound, format, args...) }
func badRequest(format string, args ...any) error {
	return errf(http.StatusBadRequest, format, args...)
}
func conflict(format string, args ...any) error { return errf(http.StatusConflict, format, args...) }
func forbidden(format string, args ...any) error {
	return errf(http.StatusForbidden, format, args...)
}

// call is one request being served. Handlers run with s.mu held; slow() releases it.
type call struct {
	sim       *Sim
	rt        *route
	r         *http.Request
	principal *Principal
	query     map[string][]string
	invalid   map[string]string
}

// serve wraps a route: fault injection, authentication, locking, the handler, the answer.
func (s *Sim) serve(rt *route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		status, who := s.serveOne(rt, w, r)
		s.mu.Lock()
		if len(s.reqLog) >= maxRequestLog {
			s.reqLog = s.reqLog[maxRequestLog/10:]
		}
		s.reqLog = append(s.reqLog, RequestRecord{Time: s.opts.Now(), Method: rt.Method, Route: rt.Base + rt.Path, Path: r.URL.Path, Status: status, Principal: who})
		s.mu.Unlock()
		if s.opts.Logf != nil {
			s.opts.Logf("%s %s -> %d principal=%q", rt.Method, r.URL.Path, status, who)
		}
	}
}

// maxRequestLine is the longest request line the front ends of the platform accept (nginx's
// default header buffer is 8 KiB; others allow 4 KiB): a longer one never reaches the API.
const maxRequestLine = 8 << 10

// uriTooLong is what a front end answers instead: a page, not the API's JSON.
const uriTooLong = "<html><head><title>414 Request-URI Too Large</title></head><body><h1>414 Request-URI Too Large</h1>" +
	"<p>The request line is longer than the front end accepts.</p></body></html>\n"

func (s *Sim) serveOne(rt *route, w http.ResponseWriter, r *http.Request) (int, string) {
	if len(r.Method)+len(r.RequestURI)+len(r.Proto)+2 > maxRequestLine {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusRequestURITooLong)
		_, _ = io.WriteString(w, uriTooLong)
		return http.StatusRequestURITooLong, ""
	}
	c := &call{sim: s, rt: rt, r: r, query: r.URL.Query(), invalid: map[string]string{}}
	// Authentication comes first, as on the platform: an untokened call is 401 whatever a
	// backend would have done.
	if rt.auth != authNone {
		p, err := s.authenticate(r)
		if err == nil && rt.auth == authOperator && !p.Operator {
			err = forbidden("Forbidden: this is an operator endpoint; a customer credential cannot use it")
		}
		if err != nil {
			return writeError(w, err), ""
		}
		c.principal = p
	}
	who := ""
	if c.principal != nil {
		who = c.principal.Name
	}
	// Faults hit the customer API only: the IAM and /sim/v1 stay reachable, so an operator
	// cannot lock themselves out of removing the faults they installed.
	var f *Fault
	if rt.Base == apiBase {
		f = s.faults.pick(rt.Key())
	}
	if f != nil && f.Latency > 0 {
		if !sleepCtx(r.Context(), f.Latency) {
			return 499, who
		}
	}
	if f != nil && f.Status != 0 && !f.Apply {
		return writeError(w, f.asError()), who
	}
	if f != nil && f.Timeout && !f.Apply {
		hang(r.Context(), f.Hang)
		return writeError(w, errf(http.StatusGatewayTimeout, "Gateway Timeout")), who
	}
	if s.opts.StrictQuery {
		for name := range c.query {
			if !slices.Contains(rt.Query, name) {
				c.invalid[name] = "Unknown parameter for this operation"
			}
		}
		if err := c.validation(); err != nil {
			return writeError(w, err), who
		}
	}
	s.mu.Lock()
	body, err := rt.handle(c)
	if err == nil && rt.Method != http.MethodGet {
		if perr := s.persist(); perr != nil {
			err = errf(http.StatusInternalServerError, "Exception: simulator could not write its state file: %v", perr)
		}
	}
	s.mu.Unlock()
	if f != nil && f.Apply {
		// The work is done, but the caller learns nothing: the "unknown outcome" that
		// idempotent creates must survive.
		if f.Timeout {
			hang(r.Context(), f.Hang)
			return writeError(w, errf(http.StatusGatewayTimeout, "Gateway Timeout")), who
		}
		return writeError(w, f.asError()), who
	}
	if err != nil {
		return writeError(w, err), who
	}
	status := rt.status
	if status == 0 {
		status = http.StatusOK
	}
	if s, ok := body.(rawText); ok {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, string(s))
		return status, who
	}
	if body == nil {
		w.WriteHeader(status)
		return status, who
	}
	writeJSON(w, status, body)
	return status, who
}

// rawText is answered as text/plain, the way the IAM hands out tokens.
type rawText string

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, err error) int {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{status: http.StatusInternalServerError, message: "Exception: " + err.Error()}
	}
	if ae.retryAfter > 0 {
		secs := int((ae.retryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	body := map[string]any{"message": ae.message}
	if len(ae.fields) > 0 {
		body["errors"] = ae.fields
	}
	writeJSON(w, ae.status, body)
	return ae.status
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// hang holds a request until the caller gives up, or for d when d > 0.
func hang(ctx context.Context, d time.Duration) {
	if d <= 0 {
		d = time.Hour
	}
	sleepCtx(ctx, d)
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// slow blocks for a platform delay with the lock released, as the real API blocks while the
// work happens. Handlers must re-read anything another request may have changed.
func (c *call) slow(d time.Duration) {
	d = c.sim.scaled(d)
	if d <= 0 {
		return
	}
	c.sim.mu.Unlock()
	sleepCtx(c.r.Context(), d)
	c.sim.mu.Lock()
}

func (c *call) now() time.Time { return c.sim.opts.Now() }

func (c *call) path(name string) string { return c.r.PathValue(name) }

// pathInt reads an integer path parameter; Flask's <int:...> converter answers 404 otherwise.
func (c *call) pathInt(name string) (int, error) {
	v, err := strconv.Atoi(c.r.PathValue(name))
	if err != nil {
		return 0, notFound("The requested URL was not found on the server.")
	}
	return v, nil
}

func (c *call) declared(name string) {
	if !slices.Contains(c.rt.Query, name) {
		panic(fmt.Sprintf("vcosim: %s reads undeclared query parameter %q", c.rt.Key(), name))
	}
}

func (c *call) has(name string) bool {
	c.declared(name)
	_, ok := c.query[name]
	return ok
}

func (c *call) str(name string) string {
	c.declared(name)
	if v := c.query[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

const missingQuery = "Missing required parameter in the query string"

func (c *call) reqStr(name string) string {
	v := c.str(name)
	if !c.has(name) {
		c.invalid[name] = missingQuery
	}
	return v
}

func (c *call) int(name string, def int) int {
	if !c.has(name) || c.str(name) == "" {
		return def
	}
	v, err := strconv.Atoi(c.str(name))
	if err != nil {
		c.invalid[name] = fmt.Sprintf("invalid literal for int() with base 10: '%s'", c.str(name))
	}
	return v
}

func (c *call) reqInt(name string) int {
	if !c.has(name) {
		c.invalid[name] = missingQuery
		return 0
	}
	return c.int(name, 0)
}

// boolean parses like flask_restx.inputs.boolean: true/false/1/0, any case.
func (c *call) boolean(name string, def bool) bool {
	if !c.has(name) {
		return def
	}
	switch strings.ToLower(c.str(name)) {
	case "true", "1":
		return true
	case "false", "0":
		return false
	}
	c.invalid[name] = fmt.Sprintf("Invalid literal for boolean(): %s", c.str(name))
	return def
}

// ints parses a CSV array of integers (collectionFormat csv).
func (c *call) ints(name string) []int {
	raw := c.str(name)
	if raw == "" {
		return nil
	}
	var out []int
	for _, part := range strings.Split(raw, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			c.invalid[name] = fmt.Sprintf("invalid literal for int() with base 10: '%s'", part)
			return nil
		}
		out = append(out, v)
	}
	return out
}

// validation returns the 400 Flask-RESTX gives for argument errors, or nil.
func (c *call) validation() error {
	if len(c.invalid) == 0 {
		return nil
	}
	return &apiError{status: http.StatusBadRequest, message: "Input payload validation failed", fields: c.invalid}
}

// decode reads the JSON body. An empty body decodes as nothing. A malformed one is answered
// as Flask-RESTX does, in the API's error shape, naming the field and the swagger type: never
// with Go's decoder messages.
func (c *call) decode(v any) error {
	if !c.rt.Body {
		panic(fmt.Sprintf("vcosim: %s reads a body it does not declare", c.rt.Key()))
	}
	b, err := io.ReadAll(io.LimitReader(c.r.Body, 4<<20))
	if err != nil {
		return badRequest("Bad Request: could not read the body")
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	return payloadError(json.Unmarshal(b, v))
}

// payloadError turns a decoding error into the API's answer.
func payloadError(err error) error {
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te) && te.Field != "":
		return &apiError{status: http.StatusBadRequest, message: "Input payload validation failed",
			fields: map[string]string{te.Field: fmt.Sprintf("%s is not of type '%s'", jsonValueKind(te.Value), swaggerType(te.Type.Kind()))}}
	case errors.As(err, &te):
		return &apiError{status: http.StatusBadRequest, message: "Input payload validation failed",
			fields: map[string]string{"payload": fmt.Sprintf("%s is not of type '%s'", jsonValueKind(te.Value), swaggerType(te.Type.Kind()))}}
	}
	return badRequest("Failed to decode JSON object: the body is not valid JSON")
}

// jsonValueKind names the JSON value encoding/json found ("string", "number 7", "object"...).
func jsonValueKind(v string) string {
	kind, _, _ := strings.Cut(v, " ")
	switch kind {
	case "string", "object", "array", "number":
		return "a JSON " + kind
	case "bool":
		return "a JSON boolean"
	}
	return "this value"
}

// swaggerType is the swagger name of the Go type a field decodes into.
func swaggerType(k reflect.Kind) string {
	switch k {
	case reflect.Map, reflect.Struct:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	return "string"
}

func success() any { return map[string]bool{"success": true} }

// list is the {"result": [...]} envelope of most lists. A nil slice still encodes as [].
func list[T any](items []T) any {
	if items == nil {
		items = []T{}
	}
	return map[string]any{"result": items}
}
