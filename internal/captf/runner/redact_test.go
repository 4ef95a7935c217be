package runner

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

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

// secretForms are the ways a known secret appears in output (issue 9): each must be redacted.
func secretForms(secret string) map[string]string {
	b := []byte(secret)
	var allEscaped strings.Builder
	for _, c := range secret {
		if r1, r2 := utf16.EncodeRune(c); r1 != utf8.RuneError {
			fmt.Fprintf(&allEscaped, `\u%04x\u%04x`, r1, r2) // outside the BMP: a surrogate pair
		} else {
			fmt.Fprintf(&allEscaped, `\u%04x`, c)
		}
	}
	noHTML := func(s string) string {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		return strings.TrimSpace(buf.String())
	}
	quoted, _ := json.Marshal(secret)
	twice, _ := json.Marshal(string(quoted))
	half := len(secret) / 2
	return map[string]string{
		"wrapped":      secret[:half] + "\n    " + secret[half:],
		"crlf":         secret[:half] + "\r\n" + secret[half:],
		"ansi":         secret[:half] + "\x1b[0m\x1b[1;32m" + secret[half:],
		"base64":       base64.StdEncoding.EncodeToString(b),
		"base64url":    base64.URLEncoding.EncodeToString(b),
		"base64 raw":   base64.RawURLEncoding.EncodeToString(b),
		"hex":          hex.EncodeToString(b),
		"HEX":          strings.ToUpper(hex.EncodeToString(b)),
		"json no html": noHTML(secret),
		"json slashes": strings.ReplaceAll(noHTML(secret), "/", `\/`),
		"json \\u":     allEscaped.String(),
		"json twice":   string(twice),
	}
}

// TestRedactForms: no form of a registered secret survives, in one piece or streamed in
// chunks of any size.
func TestRedactForms(t *testing.T) {
	for i, secret := range []string{
		`p<a&s>s"w/o\rd-7f3a9c2e`,
		"https://user:tok3n-abc@example.com/x?y=1",
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig-Ab12",
	} {
		r := testRedactor(secret)
		for name, form := range secretForms(secret) {
			t.Run(fmt.Sprintf("%d %s", i, name), func(t *testing.T) {
				text := "before " + form + " after\n"
				for _, got := range []string{r.String(text), streamed(r, text, 1), streamed(r, text, 7)} {
					if strings.Contains(got, form) || !strings.HasPrefix(got, "before ") || !strings.HasSuffix(got, " after\n") {
						t.Fatalf("secret %q as %s: got %q", secret, name, got)
					}
				}
			})
		}
	}
}

func streamed(r *redactor, text string, size int) string {
	var out bytes.Buffer
	w := r.writer(&out)
	for i := 0; i < len(text); i += size {
		_, _ = w.Write([]byte(text[i:min(i+size, len(text))]))
	}
	_ = w.Flush()
	return out.String()
}

// TestRedactBootstrapData: bootstrap data reaches the module base64 encoded; a module may
// print it encoded and wrapped at 76 columns, decoded, or only its join token.
func TestRedactBootstrapData(t *testing.T) {
	g := NewWithT(t)
	cloudInit := "#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm-join-config.yaml\n  owner: root:root\n" +
		"  permissions: '0640'\n  encoding: base64\n  content: |\n    discovery:\n      bootstrapToken:\n" +
		"        token: abcdef.0123456789abcdef\n        apiServerEndpoint: 10.0.0.1:6443\n" +
		"runcmd:\n- kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml\n" + strings.Repeat("# padding line\n", 4)
	encoded := base64.StdEncoding.EncodeToString([]byte(cloudInit))
	r := testRedactor(encoded)
	var wrapped strings.Builder
	for i := 0; i < len(encoded); i += 76 {
		wrapped.WriteString(encoded[i:min(i+76, len(encoded))] + "\n")
	}
	for name, text := range map[string]string{
		"wrapped at 76": wrapped.String(),
		"decoded":       cloudInit,
		"join token":    "joining with token abcdef.0123456789abcdef now",
		"token as json": `{"token":"abcdef.0123456789abcdef"}`,
	} {
		got := r.String(text)
		g.Expect(got).NotTo(ContainSubstring("0123456789abcdef"), name)
		g.Expect(got).NotTo(ContainSubstring(encoded[80:120]), name)
	}
	// Harmless structural lines of the secret are not redacted wherever they appear.
	for _, line := range []string{"write_files:", "#cloud-config", "runcmd:", "  encoding: base64", "  owner: root:root",
		"  permissions: '0640'", "# padding line", "discovery:"} {
		g.Expect(r.String(line+"\n")).To(Equal(line+"\n"), line)
	}
}

// TestRedactLargeSecret: a secret over 256 KiB (a kubeconfig with many certificates, one line
// of base64) is redacted whole, not skipped.
func TestRedactLargeSecret(t *testing.T) {
	g := NewWithT(t)
	raw := make([]byte, 300<<10)
	for i := range raw {
		raw[i] = byte(i*7 + i/251)
	}
	secret := base64.StdEncoding.EncodeToString(raw)
	r := testRedactor(secret)
	got := r.String("data: " + secret + "\n")
	g.Expect(got).To(Equal("data: [redacted]\n"))
	g.Expect(streamed(r, "data: "+secret+"\n", 32<<10)).To(Equal("data: [redacted]\n"))
}

// TestRedactOverlapping: of two secrets that overlap in the output, neither survives in part.
func TestRedactOverlapping(t *testing.T) {
	g := NewWithT(t)
	r := testRedactor("first-secret-abcd", "abcd-second-secret")
	g.Expect(r.String("x first-secret-abcd-second-secret y")).To(Equal("x [redacted] y"))
	g.Expect(r.String("x abcd-second-secret first-secret-abcd y")).To(Equal("x [redacted] [redacted] y"))
}

// TestLogfRedacts: the runner's own lines (an API server's error, a path) pass the redactor.
func TestLogfRedacts(t *testing.T) {
	var buf bytes.Buffer
	r := &run{log: &buf, red: testRedactor("s3cret-token-77")}
	r.logf("could not post progress events: %v", "denied for s3cret-token-77")
	NewWithT(t).Expect(buf.String()).To(Equal("captf-runner: could not post progress events: denied for [redacted]\n"))
}

// BenchmarkRedactWriter streams typical runtime output (no secret in it) through a redactor
// that knows a bootstrap script, credentials and sensitive values, in pipe-sized and in tiny
// writes: redaction must keep up with any runtime.
func BenchmarkRedactWriter(b *testing.B) {
	cloudInit := "#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm-join-config.yaml\n  content: |\n" +
		"    token: abcdef.0123456789abcdef\n    caCertHashes: [sha256:" + strings.Repeat("9f", 32) + "]\n"
	r := testRedactor(base64.StdEncoding.EncodeToString([]byte(cloudInit)), "cred-from-the-mirror-5b1e",
		"heuristic-api-token-0c77", "postgres://app:pw-8d2e41@db/app")
	for i := range 20 {
		r.Add(fmt.Sprintf("sensitive-value-%02d-%x", i, i*7919))
	}
	var line strings.Builder
	for i := range 4000 {
		fmt.Fprintf(&line, "module.role.terraform_data.node[%d]: Still creating... [%ds elapsed] id=%08x\n", i, i%60, i*2654435761)
	}
	text := []byte(line.String())
	for _, size := range []int{4 << 10, 64} {
		b.Run(fmt.Sprintf("writes of %d bytes", size), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				w := r.writer(io.Discard)
				for i := 0; i < len(text); i += size {
					_, _ = w.Write(text[i:min(i+size, len(text))])
				}
				_ = w.Flush()
			}
		})
	}
}
