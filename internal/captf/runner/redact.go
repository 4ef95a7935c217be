package runner

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	tfjson "github.com/hashicorp/terraform-json"
)

// Redacted replaces every secret in the pod log and the result.
const Redacted = "[redacted]"

const (
	// Secrets shorter than minSecretLen are not redacted: replacing every "abc" or "8080" in
	// the log would hide more than it protects. true/false/null are never secrets worth a log.
	minSecretLen = 4
	// minFragmentLen: a line or a token of a secret is redacted on its own (a provisioner
	// prints a PEM key line by line, or only the join token out of a bootstrap script) when it
	// is at least this long and holds a random-looking run (see looksRandom).
	minFragmentLen = 8
	// minEncodedLen: the shortest base64 piece of a secret inside a longer base64 text that
	// is redacted; shorter pieces would match by chance.
	minEncodedLen = 6
	// maxSecretBytes bounds one secret: the runner reads no input larger than its config files.
	maxSecretBytes = maxConfigFileBytes
	// normalizePasses undoes JSON escaping this many times over (a value escaped twice).
	normalizePasses = 4
)

// redactor knows the secret values of a run and removes them from text. Secrets may be added
// while output is streaming (the plan's sensitive values are known only after show).
//
// A secret is looked for in two views of the text. The raw view is the text as it is, searched
// for the secret, its JSON-escaped forms and its hex and base64 forms. The normalized view is the
// text with ANSI colour codes and all whitespace removed and JSON escapes undone (up to
// normalizePasses times), searched for the secret normalized the same way: it finds a secret
// wrapped across lines, with CRLF or colour codes inside, \/ or \uXXXX escaped or escaped twice,
// and base64 wrapped at 76 columns. Every byte of the text either view matches is replaced, so
// two overlapping secrets are both removed.
type redactor struct {
	mu   sync.RWMutex
	raw  *needles
	norm *needles
	seen map[string]bool
}

// needles are the byte strings one view is searched for, by first byte, longest first.
type needles [256][][]byte

func (n *needles) add(s []byte) {
	list := append(n[s[0]], s)
	sort.SliceStable(list, func(i, j int) bool { return len(list[i]) > len(list[j]) })
	n[s[0]] = list
}

// newRedactor returns a redactor without secrets.
func newRedactor() *redactor {
	return &redactor{raw: &needles{}, norm: &needles{}, seen: map[string]bool{}}
}

// Add registers a secret value. Surrounding whitespace (the newline ending a credential file)
// is not part of the secret: redacting it would join log lines. Besides the value itself, its
// random-looking lines and tokens are registered on their own, and so is its decoded form when
// it is base64 (bootstrap data is passed encoded; a module may print it decoded).
func (r *redactor) Add(secret string) {
	secret = strings.TrimSpace(secret)
	if !worthRedacting(secret) {
		return
	}
	r.mu.Lock()
	fresh := !r.seen[secret]
	r.seen[secret] = true
	r.mu.Unlock()
	if !fresh {
		return
	}
	r.addForms(secret)
	for _, f := range fragments(secret) {
		r.addForms(f)
	}
	if dec, ok := decodeBase64(secret); ok {
		r.Add(dec)
	}
}

func worthRedacting(s string) bool {
	return len(s) >= minSecretLen && len(s) <= maxSecretBytes && s != "true" && s != "false" && s != "null"
}

// addForms registers one string in every form the views search for.
func (r *redactor) addForms(s string) {
	var raw, norm []string
	raw = append(raw, s)
	for _, html := range []bool{true, false} {
		once := jsonEscape(s, html)
		raw = append(raw, once, jsonEscape(once, html), strings.ReplaceAll(once, "/", `\/`))
	}
	// JSON-escaped first too: an encoder turns invalid UTF-8 into \ufffd.
	for _, x := range []string{s, jsonEscape(s, true)} {
		norm = append(norm, x)
		for _, n := range normalize([]byte(x)) {
			norm = append(norm, string(n.b))
		}
	}
	b := []byte(s)
	enc := []string{hex.EncodeToString(b), strings.ToUpper(hex.EncodeToString(b))}
	enc = append(enc, base64Forms(b)...)
	raw = append(raw, enc...)
	norm = append(norm, enc...)

	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range raw {
		if len(x) >= minSecretLen && !r.seen["raw\x00"+x] {
			r.seen["raw\x00"+x] = true
			r.raw.add([]byte(x))
		}
	}
	for _, x := range norm {
		if len(x) >= minSecretLen && !r.seen["norm\x00"+x] {
			r.seen["norm\x00"+x] = true
			r.norm.add([]byte(x))
		}
	}
}

// jsonEscape is s as inside a JSON string, with or without HTML escaping (Go escapes <, > and &
// by default, OpenTofu's jsonencode does too, other tools do not).
func jsonEscape(s string, html bool) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(html)
	_ = enc.Encode(s)
	out := bytes.TrimSpace(buf.Bytes())
	return string(out[1 : len(out)-1])
}

// base64Forms are the standard and URL-safe base64 of b, padded and not, and the part of b's
// encoding that is the same wherever b starts inside a longer encoded text (three alignments).
func base64Forms(b []byte) []string {
	var out []string
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		raw := enc.WithPadding(base64.NoPadding)
		out = append(out, enc.EncodeToString(b), raw.EncodeToString(b))
		for k := range 3 {
			s := raw.EncodeToString(append(make([]byte, k), b...))
			// Character c encodes bits [6c, 6c+6); the known bits are [8k, 8(k+len(b))).
			lo, hi := (8*k+5)/6, 8*(k+len(b))/6
			if hi-lo >= minEncodedLen {
				out = append(out, s[lo:hi])
			}
		}
	}
	return out
}

// decodeBase64 decodes s when it is base64 (standard or URL-safe, padded or not, wrapped or
// not) of printable text that does not contain s itself.
func decodeBase64(s string) (string, bool) {
	compact := strings.Join(strings.Fields(s), "")
	if len(compact) < minFragmentLen {
		return "", false
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		dec, err := enc.DecodeString(compact)
		if err == nil && utf8.Valid(dec) && !strings.Contains(string(dec), s) && printable(dec) {
			return string(dec), true
		}
	}
	return "", false
}

func printable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 && c != '\n' && c != '\r' && c != '\t' {
			return false
		}
	}
	return true
}

// fragments are the lines of a multi-line secret and the tokens of its lines that look random
// enough to be secrets of their own: a join token or a key line printed out of a bootstrap
// script. Structural lines such as "write_files:" or "encoding: b64" are never among them, so
// they are not redacted from every log that happens to contain them.
func fragments(s string) []string {
	var out []string
	lines := strings.Split(s, "\n")
	for _, line := range lines {
		line = strings.TrimSpace(line)
		if len(lines) > 1 && line != s && len(line) >= minFragmentLen && looksRandom(line) {
			out = append(out, line)
		}
		for _, tok := range strings.FieldsFunc(line, isTokenSeparator) {
			if tok != line && tok != s && len(tok) >= minFragmentLen && looksRandom(tok) {
				out = append(out, tok)
			}
		}
	}
	return out
}

func isTokenSeparator(c rune) bool {
	switch c {
	case ' ', '\t', '\r', '"', '\'', '`', '=', ',', ';', '(', ')', '[', ']', '{', '}', '<', '>':
		return true
	}
	return false
}

// looksRandom reports a run of letters and digits that looks like a token, a key, a hash or a
// password rather than a word, a path or a YAML key: at least minFragmentLen long with both
// letters and digits in it, or 16 long with at least four upper and four lower case letters
// (base64 without digits; camelCase names have fewer humps).
func looksRandom(s string) bool {
	run, upper, lower, digits := 0, 0, 0, 0
	for i := 0; i <= len(s); i++ {
		var c byte
		if i < len(s) {
			c = s[i]
		}
		switch {
		case c >= '0' && c <= '9':
			run, digits = run+1, digits+1
		case c >= 'a' && c <= 'z':
			run, lower = run+1, lower+1
		case c >= 'A' && c <= 'Z':
			run, upper = run+1, upper+1
		default:
			if run >= minFragmentLen && upper+lower > 0 && digits > 0 || run >= 16 && upper >= 4 && lower >= 4 {
				return true
			}
			run, upper, lower, digits = 0, 0, 0, 0
		}
	}
	return false
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

// view is a text as one matcher sees it: b[i] came from the original bytes [lo[i], hi[i]).
type view struct {
	b      []byte
	lo, hi []int
}

func rawView(text []byte) view {
	v := view{b: text, lo: make([]int, len(text)), hi: make([]int, len(text))}
	for i := range text {
		v.lo[i], v.hi[i] = i, i+1
	}
	return v
}

// normalize removes ANSI escape sequences and whitespace, then undoes JSON string escapes and
// removes what that uncovers, again while that changes something (up to normalizePasses
// times). Whitespace goes first, so that a line break between the two characters of an escape
// (\ and n, or \ and \) does not change what they mean. It returns every view that differs from
// the one before, the last being the most decoded: a secret that itself holds an escape may show
// in an intermediate one only (its text and what follows it decode further).
func normalize(text []byte) []view {
	var views []view
	v, changed := rawView(text).strip()
	if changed {
		views = append(views, v)
	}
	for range normalizePasses {
		next, changed := v.unescape()
		if !changed {
			break
		}
		v, _ = next.strip()
		views = append(views, v)
	}
	return views
}

// derive starts a view built from v.
func (v view) derive() view {
	return view{b: make([]byte, 0, len(v.b)), lo: make([]int, 0, len(v.b)), hi: make([]int, 0, len(v.b))}
}

// emit appends c, made from v's bytes [from, to).
func (out *view) emit(v view, c byte, from, to int) {
	out.b = append(out.b, c)
	out.lo = append(out.lo, v.lo[from])
	out.hi = append(out.hi, v.hi[to-1])
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// strip removes whitespace and ANSI escape sequences.
func (v view) strip() (view, bool) {
	out := v.derive()
	for i := 0; i < len(v.b); {
		switch c := v.b[i]; {
		case isSpace(c):
			i++
		case c == 0x1b:
			i = skipANSI(v.b, i)
		default:
			out.emit(v, c, i, i+1)
			i++
		}
	}
	return out, len(out.b) != len(v.b)
}

// unescape undoes JSON string escapes: \" \\ \/ \b \uXXXX (and surrogate pairs); \n \r \t \f
// are whitespace and dropped.
func (v view) unescape() (view, bool) {
	out := v.derive()
	changed := false
	n := len(v.b)
	for i := 0; i < n; {
		c := v.b[i]
		if c != '\\' || i+1 >= n {
			out.emit(v, c, i, i+1)
			i++
			continue
		}
		switch d := v.b[i+1]; d {
		case '"', '\\', '/':
			out.emit(v, d, i, i+2)
			i, changed = i+2, true
		case 'n', 'r', 't', 'f':
			i, changed = i+2, true
		case 'b':
			out.emit(v, '\b', i, i+2)
			i, changed = i+2, true
		case 'u':
			r, size := unicodeEscape(v.b[i:])
			if size == 0 {
				out.emit(v, c, i, i+1)
				i++
				continue
			}
			var enc [utf8.UTFMax]byte
			for _, x := range enc[:utf8.EncodeRune(enc[:], r)] {
				out.emit(v, x, i, i+size)
			}
			i, changed = i+size, true
		default:
			out.emit(v, c, i, i+1)
			i++
		}
	}
	return out, changed
}

// skipANSI returns the index after the escape sequence at b[i] (b[i] is ESC): a CSI sequence
// (ESC [ parameters final), or ESC and one more byte.
func skipANSI(b []byte, i int) int {
	if i+1 >= len(b) {
		return i + 1
	}
	if b[i+1] != '[' {
		return i + 2
	}
	for j := i + 2; j < len(b); j++ {
		if b[j] >= 0x40 && b[j] <= 0x7e {
			return j + 1
		}
		if b[j] < 0x20 || b[j] > 0x3f {
			return j // not a CSI sequence after all; keep what follows
		}
	}
	return len(b)
}

// unicodeEscape decodes \uXXXX (and a \uXXXX\uXXXX surrogate pair) at the start of b.
func unicodeEscape(b []byte) (rune, int) {
	r1, ok := hex4(b)
	if !ok {
		return 0, 0
	}
	if utf16.IsSurrogate(r1) {
		if r2, ok := hex4(b[6:]); ok {
			if r := utf16.DecodeRune(r1, r2); r != utf8.RuneError {
				return r, 12
			}
		}
		return utf8.RuneError, 6
	}
	return r1, 6
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range b[2:6] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

type span struct{ lo, hi int }

// match finds the needles in v: the longest match at every position. Unless final, it also
// returns the first original offset from which v could be the start of a needle continuing in
// the next write; bytes from end on may still change meaning (an escape cut in two), so only
// what comes before end is compared for that.
func (v view) match(set *needles, final bool, end int) (spans []span, hold int) {
	hold = end
	k := len(v.b)
	for k > 0 && v.hi[k-1] > end {
		k--
	}
	for i := 0; i < len(v.b); i++ {
		if v.lo[i] >= hold {
			break
		}
		for _, nd := range set[v.b[i]] {
			if len(v.b)-i >= len(nd) && bytes.Equal(v.b[i:i+len(nd)], nd) {
				spans = append(spans, span{v.lo[i], v.hi[i+len(nd)-1]})
				break
			}
			if !final && i < k && k-i < len(nd) && bytes.HasPrefix(nd, v.b[i:k]) {
				hold = min(hold, v.lo[i])
			}
		}
	}
	return spans, hold
}

// redact replaces secrets in buf. Unless final, it stops before a tail of buf that could be
// the start of a secret continuing in the next write, and returns that tail as rest: this is
// what makes redaction hold across write boundaries.
func (r *redactor) redact(buf []byte, final bool) (out, rest []byte) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	end := len(buf)
	views := normalize(buf)
	if !final {
		end = incompleteEscape(buf)
		// Nor may the cut fall inside what one decoded character came from (a surrogate pair).
		for moved := true; moved; {
			moved = false
			for _, v := range views {
				j, _ := slices.BinarySearch(v.hi, end+1)
				if j < len(v.lo) && v.lo[j] < end {
					end, moved = v.lo[j], true
				}
			}
		}
	}
	spans, hold := rawView(buf).match(r.raw, final, end)
	for _, v := range views {
		nspans, nhold := v.match(r.norm, final, end)
		spans, hold = append(spans, nspans...), min(hold, nhold)
	}
	spans = mergeSpans(spans)
	end = min(end, hold)
	// A match that reaches into the held-back tail is decided with it, on the next write.
	for i, s := range spans {
		if s.hi > end {
			if s.lo < end {
				end = s.lo
			}
			spans = spans[:i]
			break
		}
	}
	out = make([]byte, 0, end+len(Redacted))
	at := 0
	for _, s := range spans {
		out = append(append(out, buf[at:s.lo]...), Redacted...)
		at = s.hi
	}
	out = append(out, buf[at:end]...)
	return out, buf[end:]
}

// incompleteEscape is where a JSON or ANSI escape that the next write may complete starts near
// the end of buf, else len(buf).
func incompleteEscape(buf []byte) int {
	for i := max(0, len(buf)-32); i < len(buf); i++ {
		if buf[i] == '\\' || buf[i] == 0x1b {
			return i
		}
	}
	return len(buf)
}

// mergeSpans sorts spans and joins those that overlap; spans that only touch stay apart, so
// two secrets side by side read as two redactions.
func mergeSpans(spans []span) []span {
	slices.SortFunc(spans, func(a, b span) int { return a.lo - b.lo })
	var out []span
	for _, s := range spans {
		if n := len(out); n > 0 && s.lo < out[n-1].hi {
			out[n-1].hi = max(out[n-1].hi, s.hi)
			continue
		}
		out = append(out, s)
	}
	return out
}

// redactWriter redacts a stream for one writer. It holds back only a tail that may be the start
// of a secret; Flush writes that tail out (redacted as far as it can be) when the stream ends.
type redactWriter struct {
	r       *redactor
	w       io.Writer
	mu      sync.Mutex
	pending []byte
	// held is how much the last redact held back. A large held tail (output that is the start
	// of a large secret) is looked at again only once it has doubled, so that output arriving
	// in small writes costs linear, not quadratic, time.
	held int
}

// minRecheck is the held tail below which every write is looked at at once.
const minRecheck = 1 << 10

func (r *redactor) writer(w io.Writer) *redactWriter { return &redactWriter{r: r, w: w} }

func (rw *redactWriter) Write(p []byte) (int, error) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.pending = append(rw.pending, p...)
	if rw.held >= minRecheck && len(rw.pending) < 2*rw.held {
		return len(p), nil
	}
	out, rest := rw.r.redact(rw.pending, false)
	rw.pending = append([]byte(nil), rest...)
	rw.held = len(rest)
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
	rw.pending, rw.held = nil, 0
	if len(out) == 0 {
		return nil
	}
	_, err := rw.w.Write(out)
	return err
}
