package vcospec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Exchange is one recorded HTTP request and its response.
type Exchange struct {
	Method      string
	Path        string // concrete path, base path included
	Query       url.Values
	ContentType string
	RequestBody []byte
	Status      int
	Response    []byte
}

// errorStatuses are the codes the swagger's global error classes stand for (see
// reference/vco-api.md §3): validation 400, Unauthorized 401, Forbidden/AccessDeniedWithoutScope 403,
// NotFound/DoesNotExist 404, Conflict/NotUnique 409, PreconditionFailed 412, Exception/G8Error 500,
// NotImplemented 501, ServiceUnavailable 503.
var errorStatuses = map[int]bool{400: true, 401: true, 403: true, 404: true, 409: true, 412: true, 500: true, 501: true, 503: true}

// Check compares one exchange with the swagger and returns every disagreement. Paths outside
// the base path, or without an operation, come back as one KindUnknownRoute violation.
func (s *Spec) Check(ex Exchange) []Violation {
	var out []Violation
	rel, ok := strings.CutPrefix(ex.Path, s.BasePath)
	if !ok {
		return []Violation{{Op: ex.Method + " " + ex.Path, Kind: KindUnknownRoute, Detail: "outside the API base path " + s.BasePath}}
	}
	op, pathVals, ok := s.Match(ex.Method, rel)
	if !ok {
		return []Violation{{Op: ex.Method + " " + rel, Kind: KindUnknownRoute, Detail: "no such operation in the swagger"}}
	}
	key := op.Method + " " + op.Path
	add := func(where, kind, detail string) {
		out = append(out, Violation{Op: key, Where: where, Kind: kind, Detail: detail})
	}
	for name, val := range pathVals {
		p, _ := op.Param(name)
		if p.Type == "integer" {
			if _, err := strconv.ParseInt(val, 10, 64); err != nil {
				add("path."+name, KindType, fmt.Sprintf("want integer, got %q", val))
			}
		}
	}
	names := make([]string, 0, len(ex.Query))
	for name := range ex.Query {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p, ok := op.Param(name)
		switch {
		case !ok:
			add("query."+name, KindUnknownParam, "not a parameter of this operation")
		case p.In != "query":
			add("query."+name, KindParamLocation, "declared in "+p.In)
		default:
			for _, v := range ex.Query[name] {
				if msg := checkScalar(p, v); msg != "" {
					add("query."+name, KindType, msg)
				}
			}
		}
	}
	for _, p := range op.Params {
		if p.In == "query" && p.Required {
			if _, ok := ex.Query[p.Name]; !ok {
				add("query."+p.Name, KindMissingParam, "required")
			}
		}
	}
	body, hasBody := op.Body()
	if len(bytes.TrimSpace(ex.RequestBody)) > 0 && !strings.HasPrefix(ex.ContentType, "application/json") {
		add("body", KindBody, "content type "+ex.ContentType+", want application/json")
	}
	switch {
	case len(bytes.TrimSpace(ex.RequestBody)) == 0:
		if hasBody && body.Required {
			add("body", KindBody, "required body missing")
		}
	case !hasBody:
		add("body", KindBody, "operation takes no body")
	default:
		v, err := decode(ex.RequestBody)
		if err != nil {
			add("body", KindBody, "not JSON: "+err.Error())
		} else {
			s.checkValue(key, "body", body.Schema, v, false, &out)
		}
	}
	out = append(out, s.checkResponse(op, key, ex)...)
	return out
}

func (s *Spec) checkResponse(op *Operation, key string, ex Exchange) []Violation {
	var out []Violation
	add := func(kind, detail string) {
		out = append(out, Violation{Op: key, Where: "response", Kind: kind, Detail: detail})
	}
	code := strconv.Itoa(ex.Status)
	sch, documented := op.Responses[code]
	if ex.Status >= 400 {
		if !documented && !errorStatuses[ex.Status] {
			add(KindStatus, fmt.Sprintf("%d is neither documented for this operation nor one of the API's error classes", ex.Status))
		}
		// Error bodies have no schema in the swagger; the simulator promises Flask-RESTX's
		// {"message": ...} shape, which clients may rely on.
		var e struct {
			Message *string `json:"message"`
		}
		if err := json.Unmarshal(ex.Response, &e); err != nil || e.Message == nil {
			add(KindBody, `error body is not {"message": ...}`)
		}
		return out
	}
	if !documented {
		add(KindStatus, fmt.Sprintf("success status %d not documented (documented: %s)", ex.Status, strings.Join(codes(op), ", ")))
		return out
	}
	if len(bytes.TrimSpace(ex.Response)) == 0 {
		if sch != nil {
			add(KindBody, "empty body, the swagger declares a model")
		}
		return out
	}
	v, err := decode(ex.Response)
	if err != nil {
		add(KindBody, "not JSON: "+err.Error())
		return out
	}
	s.checkValue(key, "response", sch, v, true, &out)
	return out
}

func codes(op *Operation) []string {
	out := make([]string, 0, len(op.Responses))
	for c := range op.Responses {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// checkScalar checks one query value against its declared type; arrays are CSV.
func checkScalar(p Param, v string) string {
	switch p.Type {
	case "integer":
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Sprintf("want integer, got %q", v)
		}
	case "number":
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return fmt.Sprintf("want number, got %q", v)
		}
	case "boolean":
		if v != "true" && v != "false" {
			return fmt.Sprintf("want true or false, got %q", v)
		}
	}
	return ""
}

func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// Recorder is an http.RoundTripper that keeps a copy of every exchange passing through it.
type Recorder struct {
	Next http.RoundTripper

	mu        sync.Mutex
	exchanges []Exchange
}

// RoundTrip records the request and response bodies and hands both on unchanged.
func (r *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	ex := Exchange{Method: req.Method, Path: req.URL.Path, Query: req.URL.Query(), ContentType: req.Header.Get("Content-Type")}
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		_ = req.Body.Close()
		ex.RequestBody = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	next := r.Next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	ex.Status, ex.Response = resp.StatusCode, b
	r.mu.Lock()
	r.exchanges = append(r.exchanges, ex)
	r.mu.Unlock()
	return resp, nil
}

// Exchanges returns a copy of everything recorded so far.
func (r *Recorder) Exchanges() []Exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Exchange(nil), r.exchanges...)
}
