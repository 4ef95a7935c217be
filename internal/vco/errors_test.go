package vco

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"
)

// TestForeignErrorBodyNotShown: an answer that is not the API's JSON error (an HTML page, the
// body of whatever service a credential's URL names, an oversized answer) never reaches the
// error, which ends up in conditions: only the status and what kind of body it was. (Today's
// HEAD, 4d97e0c, repeated the page.)
func TestForeignErrorBodyNotShown(t *testing.T) {
	const marker = "secret-marker-42"
	for _, tc := range []struct {
		name, contentType, body string
		status                  int
		want                    []string
	}{
		{"html", "text/html", "<html><body><h1>Internal</h1><p>db password " + marker + "</p></body></html>", 500,
			[]string{"500 Internal Server Error", "not an API error", "bytes of text/html", "(not shown)"}},
		{"json of another service", "application/json", `{"error":"` + marker + `","detail":{"k":"` + marker + `"}}`, 400,
			[]string{"400 Bad Request", "not an API error"}},
		{"plain text", "text/plain", "upstream said " + marker + "\n", 403, []string{"403 Forbidden", "bytes of text/plain"}},
		{"oversized", "application/json", `{"message":"` + marker + strings.Repeat("x", maxErrorBody) + `"}`, 409,
			[]string{"409 Conflict", "more than 64 KiB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			c, err := New(Credentials{URL: srv.URL + "/api/1", Customer: "acme", JWT: testJWT}, Options{MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Me(context.Background())
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if strings.Contains(msg, marker) || strings.Contains(msg, "<") || strings.Contains(msg, "\n") {
				t.Fatalf("the body shows in the error: %s", msg)
			}
			for _, want := range tc.want {
				if !strings.Contains(msg, want) {
					t.Errorf("missing %q in %s", want, msg)
				}
			}
			var ae *APIError
			if !errors.As(err, &ae) || ae.StatusCode != tc.status {
				t.Fatalf("want an APIError with status %d, got %#v", tc.status, err)
			}
		})
	}
}

// TestAPIErrorCleaned: the API's own message is kept, on one line, bounded, without control or
// direction-changing characters; a message that is not text is encoded, not Go-printed.
func TestAPIErrorCleaned(t *testing.T) {
	e := newAPIError(op{name: "X", method: "GET", path: "/x"}, 400,
		[]byte(`{"message":"line one\nline\ttwo \u202eevil\u0007","errors":{"name\n":"Missing\r\nrequired"}}`), 0)
	if e.Message != "line one line two evil" || e.Fields["name"] != "Missing required" {
		t.Fatalf("got %q %q", e.Message, e.Fields)
	}
	e = newAPIError(op{name: "X", method: "GET", path: "/x"}, 400, []byte(`{"message":{"code":7,"text":"no"}}`), 0)
	if e.Message != `{"code":7,"text":"no"}` {
		t.Fatalf("non-text message: %q", e.Message)
	}
	long := newAPIError(op{name: "X", method: "GET", path: "/x"}, 400, []byte(`{"message":"`+strings.Repeat("é", maxMessage)+`"}`), 0)
	if len(long.Message) > maxMessage+len("…") || !strings.HasSuffix(long.Message, "…") || !strings.HasPrefix(long.Message, "é") {
		t.Fatalf("long message: %d bytes", len(long.Message))
	}
	many := `{"message":"Input payload validation failed","errors":{`
	for i := range 25 {
		many += fmt.Sprintf(`"f%02d":"bad",`, i)
	}
	e = newAPIError(op{name: "X", method: "GET", path: "/x"}, 400, []byte(strings.TrimSuffix(many, ",")+`}}`), 0)
	if len(e.Fields) != maxFields || !strings.Contains(e.Message, "15 more field errors not shown") {
		t.Fatalf("%d fields, message %q", len(e.Fields), e.Message)
	}
	if e := newAPIError(op{name: "X", method: "GET", path: "/x"}, 503, nil, 0); e.Message != "" {
		t.Fatalf("empty body: %q", e.Message)
	}
}

// FuzzAPIErrorBody: whatever an error answer holds, the error is bounded, on one line, free
// of control characters and JWT-shaped strings, and repeats nothing of a body that is not the
// API's {"message": ...}.
func FuzzAPIErrorBody(f *testing.F) {
	for _, seed := range []string{
		`{"message":"Input payload validation failed","errors":{"name":"Missing required parameter"}}`,
		`{"message":"NotFound: Virtual machine 7 not found"}`,
		`<html><head><title>414 Request-URI Too Large</title></head><body>nginx</body></html>`,
		`{"message":null,"errors":{"a":1}}`, `{"message":["a","b"],"errors":{"x":{"y":"z"}}}`,
		`{"message":"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJl\u0000\u202e"}`,
		`{"error":"no message key"}`, "\x00\xff\xfe", `"just a string"`, `[]`, `{`, ``,
	} {
		f.Add([]byte(seed), 400)
	}
	f.Fuzz(func(t *testing.T, body []byte, status int) {
		e := newAPIError(op{name: "Fuzz", method: "GET", path: "/x"}, status, body, 0)
		msg := e.Error()
		if len(e.Message) > maxMessage+len("…")+64 || len(e.Fields) > maxFields {
			t.Fatalf("not bounded: message %d bytes, %d fields", len(e.Message), len(e.Fields))
		}
		for k, v := range e.Fields {
			if len(k) > maxFieldKey+len("…") || len(v) > maxFieldValue+len("…") {
				t.Fatalf("field not bounded: %d, %d bytes", len(k), len(v))
			}
		}
		for _, r := range msg {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				t.Fatalf("control character %U in %q", r, msg)
			}
		}
		if jwtPattern.MatchString(msg) {
			t.Fatalf("a JWT-shaped string survived: %q", msg)
		}
		var parsed struct {
			Message any `json:"message"`
		}
		if jsonErr := json.Unmarshal(body, &parsed); (jsonErr != nil || parsed.Message == nil || len(body) > maxErrorBody) && e.Message != "" &&
			!strings.HasPrefix(e.Message, "the answer is not an API error: ") {
			t.Fatalf("a body that is not an API error was repeated: %q", e.Message)
		}
	})
}
