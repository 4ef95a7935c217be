package runner

import (
	"slices"
	"strings"
	"testing"
)

// FuzzRedact: whatever the secret and the text around it, no registered secret survives in
// any of the forms secretForms lists, whether the text is redacted whole or streamed in
// chunks. The text around the secret holds no backslash or ESC: those would change what the
// secret's own escapes mean (`\` + `\u0041` is a backslash and "u0041", not "A").
func FuzzRedact(f *testing.F) {
	f.Add("s3cret-value", "a ", " b", uint8(0), uint8(3))
	f.Add("-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\n-----END KEY-----", "key: ", "\n", uint8(4), uint8(1))
	f.Add(`p<a&s>"w/o\rd`, `{"v":"`, `"}`, uint8(9), uint8(16))
	f.Add("dG9rZW46IGFiY2RlZi4wMTIzNDU2Nzg5YWJjZGVm", "", "", uint8(2), uint8(5))
	f.Add("abcd", "abc", "bcd", uint8(11), uint8(2))
	forms := slices.Sorted(func(yield func(string) bool) {
		for name := range secretForms("abcdefgh") {
			if !yield(name) {
				return
			}
		}
	})
	f.Fuzz(func(t *testing.T, secret, before, after string, form, chunk uint8) {
		secret = strings.TrimSpace(secret)
		// Whitespace and escapes do not count towards the shortest secret redacted.
		// ESC is a control character no secret holds; the colour codes around it are removed.
		if !worthRedacting(secret) || len(secret) > 4<<10 || len(before)+len(after) > 4<<10 ||
			strings.Contains(secret, Redacted) || strings.Contains(secret, "\x1b") {
			t.Skip()
		}
		for _, v := range normalize([]byte(secret)) {
			if len(v.b) < minSecretLen {
				t.Skip()
			}
		}
		clean := func(s string) string { return strings.NewReplacer(`\`, "", "\x1b", "").Replace(s) }
		before, after = clean(before), clean(after)
		name := forms[int(form)%len(forms)]
		shown := secretForms(secret)[name]
		r := testRedactor(secret)
		text := before + shown + after
		for _, got := range []string{r.String(text), streamed(r, text, int(chunk)%64+1)} {
			for _, part := range strings.Split(got, Redacted) {
				if strings.Contains(part, shown) {
					t.Fatalf("secret %q as %s survived in %q", secret, name, got)
				}
			}
		}
	})
}
