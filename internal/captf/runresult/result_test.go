package runresult

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func full() Result {
	r := Result{
		Version: Version, Op: "apply", Image: "capx.local/module:1", Runtime: "1.12.6",
		Steps: []Step{
			{Name: "init", ExitCode: 0, DurationMS: 812},
			{Name: "validate", ExitCode: 0, DurationMS: 200},
			{Name: "plan", ExitCode: 2, DurationMS: 1500},
			{Name: "show", ExitCode: 0, DurationMS: 300},
		},
		Plan:        &PlanSummary{Create: 1, Replace: 1, Resources: []string{"a.b (create)", "c.d (replace)"}},
		PlanHash:    "p2:" + strings.Repeat("ab", 32),
		Destructive: true,
		Error:       &Error{Kind: KindBlocked, Step: "show", Summary: "plan deletes c.d"},
	}
	return r
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	g := NewWithT(t)
	for _, r := range []Result{
		full(),
		{Version: Version, Op: "destroy", Changes: &Changes{Destroy: 3}, Steps: []Step{{Name: "destroy", ExitCode: 0, DurationMS: 1}}},
		{Version: Version, Op: "drift", Drift: &Drift{Resources: 2, Addresses: []string{"x.y", "z.w"}}},
		{Version: Version, Error: &Error{Kind: KindUsage, Summary: "unknown flag --bogus"}},
	} {
		b, err := Encode(r)
		g.Expect(err).NotTo(HaveOccurred())
		got, err := Decode(b)
		g.Expect(err).NotTo(HaveOccurred(), string(b))
		g.Expect(got).To(Equal(r))
	}
}

func TestEncodeIsBoundedAndDeterministic(t *testing.T) {
	g := NewWithT(t)
	r := full()
	r.Plan.Resources = nil
	for i := range 200 {
		r.Plan.Resources = append(r.Plan.Resources, fmt.Sprintf("module.role.terraform_data.instance[%03d] (%s)", i, strings.Repeat("x", 40)))
	}
	r.Drift = &Drift{Resources: 100}
	for i := range 100 {
		r.Drift.Addresses = append(r.Drift.Addresses, fmt.Sprintf("module.role.terraform_data.drifted[%03d]", i))
	}
	r.Error.Summary = strings.Repeat("é", 2000) + "the end"
	r.Image = strings.Repeat("i", 5000)

	a, err := Encode(r)
	g.Expect(err).NotTo(HaveOccurred())
	b, err := Encode(r)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a).To(Equal(b))
	g.Expect(len(a)).To(BeNumerically("<=", MaxEncodedSize))

	got, err := Decode(a)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Plan.Truncated).To(BeTrue())
	g.Expect(got.Plan.Resources).NotTo(BeEmpty())
	g.Expect(got.Plan.Resources[0]).To(HavePrefix("module.role.terraform_data.instance[000]"))
	g.Expect(got.Error.Summary).To(HaveSuffix("the end"))
	g.Expect(len(got.Error.Summary)).To(BeNumerically("<=", MaxSummaryBytes))
	g.Expect(got.Image).To(HaveLen(MaxTextBytes))
	// The caller's document is not modified.
	g.Expect(r.Plan.Resources).To(HaveLen(200))
}

func TestHeadTailKeepCharacters(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Head("héllo", 2)).To(Equal("h"))
	g.Expect(Tail("hellé", 1)).To(Equal(""))
	g.Expect(Tail("hellé", 2)).To(Equal("é"))
	g.Expect(Head("abc", 10)).To(Equal("abc"))
}

func TestDecodeRejects(t *testing.T) {
	valid, err := Encode(full())
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal(valid, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	for _, tc := range []struct {
		name, msg, want string
	}{
		{"empty", "  \n", "empty termination message"},
		{"garbage", "panic: runtime error", "not a result document: invalid JSON at byte 1"},
		{"truncated", string(valid[:len(valid)/2]), "truncated JSON"},
		{"too large", strings.Repeat(" ", MaxDecodeSize) + "{}", "more than the 4096"},
		{"trailing", string(valid) + "{}", "data after the result document"},
		{"unknown field", mutate(func(m map[string]any) { m["extra"] = 1 }), "unknown field"},
		{"wrong type", mutate(func(m map[string]any) { m["op"] = 7 }), `field "op" has a JSON number`},
		{"version", mutate(func(m map[string]any) { m["version"] = 2 }), "version 2"},
		{"unknown op", mutate(func(m map[string]any) { m["op"] = "explode" }), "unknown op"},
		{"no op", mutate(func(m map[string]any) { delete(m, "op") }), "op is missing"},
		{"kind", mutate(func(m map[string]any) { m["error"] = map[string]any{"kind": "oops"} }), "unknown error kind"},
		{"hash", mutate(func(m map[string]any) { m["planHash"] = "p1:abc" }), "not a p2"},
		{"negative", mutate(func(m map[string]any) { m["changes"] = map[string]any{"add": -1, "change": 0, "destroy": 0} }), "negative"},
		{"step", mutate(func(m map[string]any) { m["steps"] = []any{map[string]any{"name": "", "exitCode": 0, "durationMs": 0}} }), "invalid step"},
		{"drift", mutate(func(m map[string]any) { m["drift"] = map[string]any{"resources": 0, "addresses": []string{"a"}} }), "invalid drift"},
		{"summary", mutate(func(m map[string]any) {
			m["error"] = map[string]any{"kind": "step", "summary": strings.Repeat("x", 600)}
		}), "error text longer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Decode([]byte(tc.msg))
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
	_, err = Decode(nil)
	if !errors.Is(err, ErrEmpty) {
		t.Fatalf("Decode(nil) = %v, want ErrEmpty", err)
	}
}

func TestDecodeErrorsNeverQuoteTheMessage(t *testing.T) {
	g := NewWithT(t)
	secret := "hunter2-secret-value"
	for _, msg := range []string{
		`{"version":1,"op":"` + secret + `"}`,
		`{"version":1,"` + secret + `":1}`,
		`{"version":"` + secret + `"}`,
		secret,
	} {
		_, err := Decode([]byte(msg))
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).NotTo(ContainSubstring(secret))
	}
}

func FuzzDecode(f *testing.F) {
	for _, r := range []Result{full(), {Version: Version, Op: "plan"}} {
		b, _ := Encode(r)
		f.Add(b)
	}
	f.Add([]byte(`{"version":1,"op":"apply","error":{"kind":"step"}}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, msg []byte) {
		r, err := Decode(msg)
		if err != nil {
			return
		}
		// Whatever Decode accepts, Encode writes back within bounds and Decode accepts again.
		b, err := Encode(r)
		if err != nil {
			t.Fatalf("Encode of a decoded result: %v", err)
		}
		if len(b) > MaxEncodedSize {
			t.Fatalf("encoded %d bytes", len(b))
		}
		if _, err := Decode(b); err != nil {
			t.Fatalf("re-decode: %v\n%s", err, b)
		}
	})
}

// TestRedact: every free text of a result passes the redactor, and entries that redact to
// nothing are dropped so the document still decodes.
func TestRedact(t *testing.T) {
	g := NewWithT(t)
	r := full()
	r.Plan.Resources = append(r.Plan.Resources, `x.y["s3cret"] (create)`, "s3cret")
	r.Drift = &Drift{Resources: 2, Addresses: []string{`a["s3cret"]`, "b"}}
	r.Error.Summary = "Error: s3cret is wrong"
	red := r.Redact(func(s string) string {
		if s == "s3cret" {
			return ""
		}
		return strings.ReplaceAll(s, "s3cret", "[redacted]")
	})
	b, err := Encode(red)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).NotTo(ContainSubstring("s3cret"))
	g.Expect(red.Plan.Resources).To(Equal([]string{"a.b (create)", "c.d (replace)", `x.y["[redacted]"] (create)`}))
	g.Expect(red.Drift.Addresses).To(Equal([]string{`a["[redacted]"]`, "b"}))
	g.Expect(red.Error.Summary).To(Equal("Error: [redacted] is wrong"))
	_, err = Decode(b)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Plan.Resources).To(HaveLen(4), "the original is left alone")
	g.Expect(r.Error.Summary).To(ContainSubstring("s3cret"))
}
