package planhash

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"
	. "github.com/onsi/gomega"
)

var key = []byte("0123456789abcdef0123456789abcdef")

// rc builds one resource change as plan JSON.
type rc struct {
	addr, prev, deposed, mode string
	actions                   []string
	before, after             any
	unknown, bSens, aSens     any
	importID                  string
}

func (r rc) json() map[string]any {
	ch := map[string]any{"actions": r.actions, "before": r.before, "after": r.after}
	for k, v := range map[string]any{"after_unknown": r.unknown, "before_sensitive": r.bSens, "after_sensitive": r.aSens} {
		if v != nil {
			ch[k] = v
		}
	}
	if r.importID != "" {
		ch["importing"] = map[string]any{"id": r.importID}
	}
	m := map[string]any{"address": r.addr, "mode": "managed", "type": "terraform_data", "name": "x", "change": ch}
	if r.mode != "" {
		m["mode"] = r.mode
	}
	if r.prev != "" {
		m["previous_address"] = r.prev
	}
	if r.deposed != "" {
		m["deposed"] = r.deposed
	}
	return m
}

func plan(t testing.TB, outputs map[string]any, changes ...rc) *tfjson.Plan {
	t.Helper()
	var rcs []any
	for _, c := range changes {
		rcs = append(rcs, c.json())
	}
	doc := map[string]any{"format_version": "1.2", "resource_changes": rcs}
	if outputs != nil {
		doc["output_changes"] = outputs
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func fp(t testing.TB, p *tfjson.Plan) string {
	t.Helper()
	h, err := Fingerprint(key, p, binding)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// binding is the binding fp fingerprints with.
var binding = Binding{Lineage: "5b1a7c2e-0000-4000-8000-000000000001", Serial: 7, InputsHash: "h2:abc", PlanFile: "9f86d0"}

func obj(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func update(before, after any) rc {
	return rc{addr: "module.role.terraform_data.net", actions: []string{"update"}, before: before, after: after}
}

func TestFingerprintFormat(t *testing.T) {
	g := NewWithT(t)
	p := plan(t, nil, rc{addr: "a.b", actions: []string{"create"}, after: obj("x", 1), unknown: obj("id", true), aSens: obj()})

	// Recompute the documented format by hand.
	mac := func(s string) string {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(s))
		return hex.EncodeToString(m.Sum(nil))
	}
	head := "binding|" + mac(`{"inputs":"h2:abc","lineage":"5b1a7c2e-0000-4000-8000-000000000001","planFile":"9f86d0","serial":7}`)
	line := "a.b|create|" + mac(`{"after":{"x":1},"after_sensitive":{},"after_unknown":{"id":true}}`)
	sum := sha256.Sum256([]byte(head + "\n" + line))
	g.Expect(fp(t, p)).To(Equal(Prefix + hex.EncodeToString(sum[:])))
}

// TestFingerprintBinding: an approval binds the state the plan was made against (lineage and
// serial), the inputs and the saved plan file, not only the changes: each one that differs
// gives another fingerprint. A plan without changes is Empty whatever its binding.
func TestFingerprintBinding(t *testing.T) {
	p := plan(t, nil, update(obj("input", "a"), obj("input", "b")))
	base := fp(t, p)
	for name, mutate := range map[string]func(b *Binding){
		"lineage":     func(b *Binding) { b.Lineage = "5b1a7c2e-0000-4000-8000-000000000002" },
		"serial":      func(b *Binding) { b.Serial++ },
		"no serial":   func(b *Binding) { b.Serial = 0 },
		"inputs hash": func(b *Binding) { b.InputsHash = "h2:abd" },
		"plan file":   func(b *Binding) { b.PlanFile = "9f86d1" },
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			b := binding
			mutate(&b)
			h, err := Fingerprint(key, p, b)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(h).NotTo(Equal(base))
			g.Expect(h).To(HavePrefix(Prefix))
		})
	}
	g := NewWithT(t)
	same, err := Fingerprint(key, p, binding)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(same).To(Equal(base), "the same plan and binding hash alike")
	empty, err := Fingerprint(key, plan(t, nil), Binding{Lineage: "x", Serial: 3})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(empty).To(Equal(Empty))
}

// TestSameChanges: the approved apply's second check compares changes, not bindings.
func TestSameChanges(t *testing.T) {
	g := NewWithT(t)
	a := plan(t, nil, update(obj("input", "a"), obj("input", "b")))
	same, err := SameChanges(a, plan(t, nil, update(obj("input", "a"), obj("input", "b"))))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(same).To(BeTrue())
	same, err = SameChanges(a, plan(t, nil, update(obj("input", "a"), obj("input", "c"))))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(same).To(BeFalse())
	same, err = SameChanges(a, plan(t, nil))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(same).To(BeFalse())
	_, err = SameChanges(a, nil)
	g.Expect(err).To(HaveOccurred())
}

func TestFingerprintEmpty(t *testing.T) {
	g := NewWithT(t)
	g.Expect(fp(t, plan(t, nil))).To(Equal(Empty))
	noop := rc{addr: "a.b", actions: []string{"no-op"}, before: obj("x", 1), after: obj("x", 1)}
	g.Expect(fp(t, plan(t, map[string]any{"o": map[string]any{"actions": []string{"no-op"}}}, noop))).To(Equal(Empty))
	sum := sha256.Sum256(nil)
	g.Expect(Empty).To(Equal(Prefix + hex.EncodeToString(sum[:])))
}

func TestFingerprintRefusesWithoutKey(t *testing.T) {
	_, err := Fingerprint(nil, plan(t, nil), binding)
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("empty plan key")))
}

// TestFingerprintDistinguishes lists pairs of plans that must, or must not, hash alike.
func TestFingerprintDistinguishes(t *testing.T) {
	base := update(obj("input", "a", "tags", obj("k", "v")), obj("input", "b", "tags", obj("k", "v")))
	for _, tc := range []struct {
		name string
		a, b []rc
		same bool
	}{
		{"identical", []rc{base}, []rc{base}, true},
		{"untouched attribute differs", []rc{base},
			[]rc{update(obj("input", "a", "tags", obj("k", "w")), obj("input", "b", "tags", obj("k", "w")))}, true},
		{"changed value differs", []rc{base}, []rc{update(obj("input", "a"), obj("input", "c"))}, false},
		{"null versus absent", []rc{update(obj("input", "a", "x", "v"), obj("input", "a", "x", nil))},
			[]rc{update(obj("input", "a", "x", "v"), obj("input", "a"))}, false},
		{"list index versus map key", []rc{update(obj("m", obj("0", "a")), obj("m", obj("0", "b")))},
			[]rc{update(obj("m", []any{"a"}), obj("m", []any{"b"}))}, false},
		{"unknown after apply", []rc{update(obj("id", "1"), obj("id", "1"))},
			[]rc{{addr: base.addr, actions: []string{"update"}, before: obj("id", "1"), after: obj(), unknown: obj("id", true)}}, false},
		{"sensitivity only", []rc{update(obj("p", "s"), obj("p", "s", "q", 1))},
			[]rc{{addr: base.addr, actions: []string{"update"}, before: obj("p", "s"), after: obj("p", "s", "q", 1), aSens: obj("p", true)}}, false},
		{"replace order", []rc{{addr: "a.b", actions: []string{"delete", "create"}, before: obj("x", 1), after: obj("x", 2)}},
			[]rc{{addr: "a.b", actions: []string{"create", "delete"}, before: obj("x", 1), after: obj("x", 2)}}, false},
		{"delete ignores what is deleted", []rc{{addr: "a.b", actions: []string{"delete"}, before: obj("x", 1)}},
			[]rc{{addr: "a.b", actions: []string{"delete"}, before: obj("x", 2)}}, true},
		{"deposed delete differs from current", []rc{{addr: "a.b", actions: []string{"delete"}, before: obj("x", 1)}},
			[]rc{{addr: "a.b", actions: []string{"delete"}, before: obj("x", 1), deposed: "00000001"}}, false},
		{"order of changes is irrelevant", []rc{base, {addr: "a.b", actions: []string{"create"}, after: obj()}},
			[]rc{{addr: "a.b", actions: []string{"create"}, after: obj()}, base}, true},
		{"import counts even as no-op", []rc{{addr: "a.b", actions: []string{"no-op"}, before: obj(), after: obj()}},
			[]rc{{addr: "a.b", actions: []string{"no-op"}, before: obj(), after: obj(), importID: "i-1"}}, false},
		{"move counts even as no-op", []rc{{addr: "a.c", actions: []string{"no-op"}, before: obj(), after: obj()}},
			[]rc{{addr: "a.c", prev: "a.b", actions: []string{"no-op"}, before: obj(), after: obj()}}, false},
		{"big integers stay exact", []rc{update(obj("n", json.Number("9007199254740993")), obj("n", json.Number("9007199254740995")))},
			[]rc{update(obj("n", json.Number("9007199254740993")), obj("n", json.Number("9007199254740994")))}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := fp(t, plan(t, nil, tc.a...)), fp(t, plan(t, nil, tc.b...))
			if tc.same {
				NewWithT(t).Expect(a).To(Equal(b))
			} else {
				NewWithT(t).Expect(a).NotTo(Equal(b))
			}
		})
	}
}

func TestFingerprintOutputsAndKey(t *testing.T) {
	g := NewWithT(t)
	out := func(v string) map[string]any {
		return map[string]any{"health": map[string]any{"actions": []string{"update"}, "before": "a", "after": v, "after_sensitive": true}}
	}
	g.Expect(fp(t, plan(t, out("b")))).NotTo(Equal(Empty))
	g.Expect(fp(t, plan(t, out("b")))).NotTo(Equal(fp(t, plan(t, out("c")))))
	other, err := Fingerprint([]byte("another key"), plan(t, out("b")), binding)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other).NotTo(Equal(fp(t, plan(t, out("b")))))
}

func TestDestructive(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    rc
		want bool
	}{
		{"create", rc{actions: []string{"create"}}, false},
		{"update", rc{actions: []string{"update"}}, false},
		{"delete", rc{actions: []string{"delete"}}, true},
		{"replace delete first", rc{actions: []string{"delete", "create"}}, true},
		{"replace create first", rc{actions: []string{"create", "delete"}}, true},
		{"deposed delete", rc{actions: []string{"delete"}, deposed: "abc"}, true},
		{"forget", rc{actions: []string{"forget"}}, false},
		{"import", rc{actions: []string{"no-op"}, importID: "x"}, false},
		{"move", rc{actions: []string{"no-op"}, prev: "a.old"}, false},
		{"data source", rc{actions: []string{"delete"}, mode: "data"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.addr = "a.b"
			NewWithT(t).Expect(Destructive(plan(t, nil, tc.c))).To(Equal(tc.want))
		})
	}
	NewWithT(t).Expect(Destructive(nil)).To(BeFalse())
}

func TestSummarize(t *testing.T) {
	g := NewWithT(t)
	p := plan(t, map[string]any{
		"a": map[string]any{"actions": []string{"create"}, "after": 1},
		"b": map[string]any{"actions": []string{"no-op"}},
	},
		rc{addr: "z.one", actions: []string{"create"}},
		rc{addr: "b.two", actions: []string{"delete", "create"}},
		rc{addr: "c.three", actions: []string{"update"}, prev: "c.old"},
		rc{addr: "d.four", actions: []string{"delete"}},
		rc{addr: "d.four", actions: []string{"delete"}, deposed: "01"},
		rc{addr: "e.five", actions: []string{"no-op"}, importID: "i"},
		rc{addr: "f.six", actions: []string{"no-op"}},
		rc{addr: "g.seven", actions: []string{"read"}, mode: "data"},
		rc{addr: "h.eight", actions: []string{"forget"}},
	)
	s := Summarize(p)
	g.Expect(s.Create).To(Equal(1))
	g.Expect(s.Update).To(Equal(1))
	g.Expect(s.Replace).To(Equal(1))
	g.Expect(s.Delete).To(Equal(2))
	g.Expect(s.OutputChanges).To(Equal(1))
	g.Expect(s.Truncated).To(BeFalse())
	g.Expect(s.Resources).To(Equal([]string{
		"b.two (replace)",
		"c.three (update, move)",
		"d.four (delete)",
		"d.four (delete, deposed)",
		"e.five (import)",
		"g.seven (read)",
		"h.eight (forget)",
		"z.one (create)",
	}))
}

func TestSummarizeTruncates(t *testing.T) {
	g := NewWithT(t)
	var changes []rc
	for i := 60; i > 0; i-- {
		changes = append(changes, rc{addr: fmt.Sprintf("a.r%02d", i), actions: []string{"create"}})
	}
	s := Summarize(plan(t, nil, changes...))
	g.Expect(s.Create).To(Equal(60))
	g.Expect(s.Truncated).To(BeTrue())
	g.Expect(s.Resources).To(HaveLen(50))
	g.Expect(s.Resources[0]).To(Equal("a.r01 (create)"))
	g.Expect(s.Resources[49]).To(Equal("a.r50 (create)"))
}

func TestDriftSummary(t *testing.T) {
	g := NewWithT(t)
	var changes []rc
	for i := range 25 {
		changes = append(changes, update(obj("input", "a"), obj("input", "b")))
		changes[i].addr = fmt.Sprintf("m.r%02d", i)
	}
	changes = append(changes, rc{addr: "data.x.y", mode: "data", actions: []string{"read"}})
	d := DriftSummary(plan(t, map[string]any{"o": map[string]any{"actions": []string{"update"}}}, changes...))
	g.Expect(d.Resources).To(Equal(25))
	g.Expect(d.Outputs).To(Equal(1))
	g.Expect(d.Addresses).To(HaveLen(20))
	g.Expect(d.Addresses[0]).To(Equal("m.r00"))
	g.Expect(d.Truncated).To(BeTrue())
}

func FuzzFingerprint(f *testing.F) {
	for _, doc := range []string{
		`{"format_version":"1.2"}`,
		`{"format_version":"1.2","resource_changes":[{"address":"a.b","mode":"managed","change":{"actions":["update"],"before":{"x":[1,{"y":null}]},"after":{"x":[2]},"after_unknown":{"x":[false,true]},"before_sensitive":{"x":true}}}]}`,
		`{"format_version":"1.2","resource_changes":[{"address":"a.b","previous_address":"a.c","change":{"actions":["no-op"],"importing":{"id":"1"}}}],"output_changes":{"o":{"actions":["create"],"after":"v"}}}`,
		`{"format_version":"1.2","resource_changes":[{"address":"a.b","deposed":"1","change":{"actions":["create","delete"],"before":1,"after":{"a":{"b":{"c":true}}},"after_sensitive":true}}]}`,
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, err := Parse(doc)
		if err != nil {
			return
		}
		a, err := Fingerprint(key, p, binding)
		if err != nil {
			t.Fatalf("Fingerprint of a parsed plan: %v", err)
		}
		if !strings.HasPrefix(a, Prefix) || len(a) != len(Empty) {
			t.Fatalf("malformed fingerprint %q", a)
		}
		// Re-parsing the same document gives the same fingerprint (no map-order dependence).
		p2, _ := Parse(doc)
		if b, _ := Fingerprint(key, p2, binding); a != b {
			t.Fatalf("fingerprint not deterministic: %s != %s", a, b)
		}
		s := Summarize(p)
		if len(s.Resources) > 50 {
			t.Fatalf("summary lists %d resources", len(s.Resources))
		}
		_ = Destructive(p)
		if d := DriftSummary(p); len(d.Addresses) > 20 || d.Resources < len(d.Addresses) {
			t.Fatalf("bad drift summary %+v", d)
		}
	})
}
