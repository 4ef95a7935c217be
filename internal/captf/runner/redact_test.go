package runner

import (
	"bytes"
	"strings"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"
	. "github.com/onsi/gomega"
)

func testRedactor(secrets ...string) *redactor {
	r := newRedactor()
	for _, s := range secrets {
		r.Add(s)
	}
	return r
}

func TestRedactString(t *testing.T) {
	for _, tc := range []struct {
		name    string
		secrets []string
		in      string
		want    string
	}{
		{"plain", []string{"s3cr3t-value"}, "a s3cr3t-value b", "a [redacted] b"},
		{"every occurrence", []string{"tok1"}, "tok1tok1 tok1", "[redacted][redacted] [redacted]"},
		{"longest wins", []string{"abcd1234", "abcd1234efgh"}, "xabcd1234efghx abcd1234", "x[redacted]x [redacted]"},
		{"too short to redact", []string{"abc", "true"}, "abc true", "abc true"},
		{"trailing newline is not secret", []string{"from-a-file\n"}, "x=from-a-file\ny", "x=[redacted]\ny"},
		{"json escaped", []string{"pa\"ss\nword"}, `{"p":"pa\"ss\nword"}`, `{"p":"[redacted]"}`},
		{"lines of a multi-line secret", []string{"-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG\n-----END KEY-----"},
			"out: MIIEvQIBADANBgkqhkiG\n", "out: [redacted]\n"},
		{"base64 decoded", []string{"Ym9vdHN0cmFwLXNlY3JldA=="}, "bootstrap-secret and Ym9vdHN0cmFwLXNlY3JldA==", "[redacted] and [redacted]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(testRedactor(tc.secrets...).String(tc.in)).To(Equal(tc.want))
		})
	}
}

// TestRedactWriterSplitsAnywhere writes the same text in chunks of every size: a secret split
// across writes must be redacted exactly as in one piece.
func TestRedactWriterSplitsAnywhere(t *testing.T) {
	r := testRedactor("first-secret", "second-secret-longer", "second-sec")
	text := "a first-secret b second-secret-longer c second-sec d first-secre" + "\nfirst-secret"
	want := r.String(text)
	for size := 1; size <= len(text); size++ {
		var out bytes.Buffer
		w := r.writer(&out)
		for i := 0; i < len(text); i += size {
			_, _ = w.Write([]byte(text[i:min(i+size, len(text))]))
		}
		_ = w.Flush()
		if out.String() != want {
			t.Fatalf("chunk size %d: got %q, want %q", size, out.String(), want)
		}
	}
	if strings.Contains(want, "first-secret") || !strings.Contains(want, "first-secre\n") {
		t.Fatalf("unexpected redaction %q", want)
	}
}

// TestRedactWriterHoldsOnlyPrefixes: output that cannot start a secret is passed on at once,
// so the pod log stays live.
func TestRedactWriterHoldsOnlyPrefixes(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	w := testRedactor("secret-value").writer(&out)
	_, _ = w.Write([]byte("line one\nsecr"))
	g.Expect(out.String()).To(Equal("line one\n"))
	_, _ = w.Write([]byte("et-value\n"))
	g.Expect(out.String()).To(Equal("line one\n[redacted]\n"))
	_, _ = w.Write([]byte("secret-val"))
	_ = w.Flush()
	g.Expect(out.String()).To(Equal("line one\n[redacted]\nsecret-val"))
}

// TestRedactLearnsLater: secrets learnt mid-stream (from the plan) apply to what follows.
func TestRedactLearnsLater(t *testing.T) {
	g := NewWithT(t)
	r := newRedactor()
	var out bytes.Buffer
	w := r.writer(&out)
	_, _ = w.Write([]byte("before module-secret\n"))
	plan := &tfjson.Plan{ResourceChanges: []*tfjson.ResourceChange{{
		Address: "a.b",
		Change: &tfjson.Change{
			Actions:        tfjson.Actions{tfjson.ActionCreate},
			After:          map[string]any{"input": "module-secret", "list": []any{"public", "listed-secret"}, "open": "public-value"},
			AfterSensitive: map[string]any{"input": true, "list": []any{false, true}},
		},
	}}}
	r.AddSensitive(plan)
	_, _ = w.Write([]byte("after module-secret listed-secret public-value\n"))
	_ = w.Flush()
	g.Expect(out.String()).To(Equal("before module-secret\nafter [redacted] [redacted] public-value\n"))
}
