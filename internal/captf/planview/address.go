package planview

import (
	"strconv"
	"strings"
)

// CompareAddresses orders resource addresses as `tofu show` lists them: by module path (the
// root first, a shorter path first, then each step's name and instance key), data sources
// before managed resources, then type, name and instance key, where integer keys compare as
// numbers (r[2] before r[10]), come after no key and before string keys. An address it cannot
// parse (a module may name anything, and a view may carry redacted addresses) sorts after every
// parsed one, in byte order; equal parsed forms fall back to byte order too, so the order is
// total and a sort is deterministic.
func CompareAddresses(a, b string) int {
	pa, oka := parseAddress(a)
	pb, okb := parseAddress(b)
	switch {
	case oka && !okb:
		return -1
	case !oka && okb:
		return 1
	case oka && okb:
		if c := compareParsed(pa, pb); c != 0 {
			return c
		}
	}
	return strings.Compare(a, b)
}

// instanceKey is a count index, a for_each key, or neither.
type instanceKey struct {
	kind keyKind
	num  int64
	str  string
}

// keyKind orders the kinds of key: no key, then numbers, then strings.
type keyKind int

const (
	noKey keyKind = iota
	intKey
	stringKey
)

type addrStep struct {
	name string
	key  instanceKey
}

type address struct {
	modules []addrStep
	data    bool
	typ     string
	name    string
	key     instanceKey
}

func compareParsed(a, b address) int {
	if len(a.modules) != len(b.modules) {
		return compareInt(int64(len(a.modules)), int64(len(b.modules)))
	}
	for i := range a.modules {
		if c := strings.Compare(a.modules[i].name, b.modules[i].name); c != 0 {
			return c
		}
		if c := compareKeys(a.modules[i].key, b.modules[i].key); c != 0 {
			return c
		}
	}
	if a.data != b.data {
		if a.data {
			return -1
		}
		return 1
	}
	if c := strings.Compare(a.typ, b.typ); c != 0 {
		return c
	}
	if c := strings.Compare(a.name, b.name); c != 0 {
		return c
	}
	return compareKeys(a.key, b.key)
}

func compareKeys(a, b instanceKey) int {
	if a.kind != b.kind {
		return compareInt(int64(a.kind), int64(b.kind))
	}
	if a.kind == intKey {
		return compareInt(a.num, b.num)
	}
	return strings.Compare(a.str, b.str)
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseAddress reads `module.NAME[KEY].` steps, an optional `data.`, then `TYPE.NAME[KEY]`.
func parseAddress(s string) (address, bool) {
	var a address
	for strings.HasPrefix(s, "module.") {
		name, key, rest, ok := parseStep(s[len("module."):])
		if !ok || !strings.HasPrefix(rest, ".") {
			return address{}, false
		}
		a.modules = append(a.modules, addrStep{name: name, key: key})
		s = rest[1:]
	}
	if strings.HasPrefix(s, "data.") {
		a.data = true
		s = s[len("data."):]
	}
	typ, rest, ok := identifier(s)
	if !ok || !strings.HasPrefix(rest, ".") {
		return address{}, false
	}
	name, key, rest, ok := parseStep(rest[1:])
	if !ok || rest != "" {
		return address{}, false
	}
	a.typ, a.name, a.key = typ, name, key
	return a, true
}

// parseStep reads NAME and an optional [KEY], returning what follows.
func parseStep(s string) (string, instanceKey, string, bool) {
	name, rest, ok := identifier(s)
	if !ok {
		return "", instanceKey{}, "", false
	}
	if !strings.HasPrefix(rest, "[") {
		return name, instanceKey{}, rest, true
	}
	key, rest, ok := parseKey(rest[1:])
	return name, key, rest, ok
}

// parseKey reads a key after its `[`: digits, or a quoted string with backslash escapes, then `]`.
func parseKey(s string) (instanceKey, string, bool) {
	if strings.HasPrefix(s, `"`) {
		end := closingQuote(s)
		if end < 0 || !strings.HasPrefix(s[end+1:], "]") {
			return instanceKey{}, "", false
		}
		str, err := strconv.Unquote(s[:end+1])
		if err != nil {
			// An escape Go does not know (HCL's $${): the key as written still orders strings.
			str = s[1:end]
		}
		return instanceKey{kind: stringKey, str: str}, s[end+2:], true
	}
	i := strings.IndexByte(s, ']')
	if i <= 0 {
		return instanceKey{}, "", false
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s[:i] {
		return instanceKey{}, "", false
	}
	return instanceKey{kind: intKey, num: n}, s[i+1:], true
}

// closingQuote is the index of the quote that ends the string s starts, or -1.
func closingQuote(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// identifier reads an HCL identifier (letters, digits, '_' and '-', not starting with a digit
// or '-'), returning what follows.
func identifier(s string) (string, string, bool) {
	i := 0
	for i < len(s) {
		c := s[i]
		letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80
		if !letter && (i == 0 || !(c == '-' || (c >= '0' && c <= '9'))) {
			break
		}
		i++
	}
	return s[:i], s[i:], i > 0
}
