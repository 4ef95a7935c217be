package inputs

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/testenv"
)

func TestClusterOutputsAndSameExports(t *testing.T) {
	g := NewWithT(t)
	src := sources()[contract.RoleMachinePool]
	src.ClusterOutputs = raw(`{"b": 1.50, "a": [1, 2]}`)
	r, err := Render(src)
	g.Expect(err).NotTo(HaveOccurred())
	out, err := ClusterOutputs(r.TFVars)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(Equal(`{"a":[1,2],"b":1.50}`))
	g.Expect(SameExports(out, raw(`{ "a": [1,2], "b": 1.50 }`))).To(BeTrue())
	g.Expect(SameExports(out, raw(`{"a": [1, 2], "b": 1.5}`))).To(BeFalse(), "numbers as written")
	g.Expect(SameExports(nil, raw(`{}`))).To(BeTrue())
	g.Expect(SameExports(raw(`{`), raw(`{`))).To(BeFalse(), "undecodable is never the same")

	src.ClusterOutputs = nil
	r, err = Render(src)
	g.Expect(err).NotTo(HaveOccurred())
	out, err = ClusterOutputs(r.TFVars)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(Equal(`{}`))
}

func TestKeptExportsBudget(t *testing.T) {
	g := NewWithT(t)
	src := sources()[contract.RoleMachinePool]
	src.ClusterOutputs = raw(`{"network_name": "n1"}`)
	r, err := Render(src)
	g.Expect(err).NotTo(HaveOccurred())
	rec := KeptExports(r)
	g.Expect(rec).To(Equal(ExportsRecord{Exports: raw(`{"network_name":"n1"}`), Status: ExportsKept}))
	g.Expect(rec.Usable()).To(BeTrue())
	g.Expect(rec.Equal(KeptExports(r))).To(BeTrue())
	rec.Pending = "h2:x"
	g.Expect(rec.Usable()).To(BeFalse(), "pending")
	g.Expect(rec.Equal(KeptExports(r))).To(BeFalse())
	g.Expect(ExportsRecord{}.Equal(ExportsRecord{Exports: raw(``)})).To(BeFalse(), "no record is not an empty one")

	// Inputs that fit the budget, whose record would not fit beside them.
	src.ClusterOutputs = raw(`{"blob": "` + strings.Repeat("x", MaxSize*3/5) + `"}`)
	r, err = Render(src)
	g.Expect(err).NotTo(HaveOccurred())
	rec = KeptExports(r)
	g.Expect(rec).To(Equal(ExportsRecord{Status: ExportsOverBudget}))
	g.Expect(rec.Usable()).To(BeFalse())
}

// The record lives in the pool's durable inputs Secret: EnsureApply marks it pending when an
// apply of other exports is about to start (and only then: Ensure, which owner repair calls with
// the stored inputs, never does), WriteExportsRecord writes what the controller settled, and
// Read returns it.
func TestExportsRecordInDurableSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t)
	tmp := testenv.TerraformMachinePool(ns, "workers", "c1", "example.com/module:v1")
	g.Expect(env.Client.Create(ctx, tmp)).To(Succeed())
	owner, err := jobs.OwnerOf(tmp, "c1")
	g.Expect(err).NotTo(HaveOccurred())
	src := sources()[contract.RoleMachinePool]
	src.Owner, src.Object = owner, tmp
	render := func(exports string, replicas int32) *Rendered {
		t.Helper()
		s := src
		pool := *src.MachinePool
		pool.Replicas = replicas
		s.MachinePool = &pool
		s.ClusterOutputs = raw(exports)
		r, err := Render(s)
		g.Expect(err).NotTo(HaveOccurred())
		return r
	}
	read := func() ExportsRecord {
		t.Helper()
		stored, err := Read(ctx, env.Client, owner)
		g.Expect(err).NotTo(HaveOccurred())
		return stored.Exports
	}

	a := render(`{"attachment": "a1"}`, 2)
	g.Expect(EnsureApply(ctx, env.Client, owner, a)).To(BeTrue())
	g.Expect(read()).To(Equal(ExportsRecord{}), "nothing recorded before an apply succeeded")
	g.Expect(EnsureApply(ctx, env.Client, owner, render(`{"attachment": "a2"}`, 2))).To(BeTrue())
	g.Expect(read()).To(Equal(ExportsRecord{}), "nothing to mark pending")

	kept := KeptExports(a)
	g.Expect(WriteExportsRecord(ctx, env.Client, owner, kept)).To(BeTrue())
	g.Expect(WriteExportsRecord(ctx, env.Client, owner, kept)).To(BeFalse(), "written once")
	g.Expect(read()).To(Equal(kept))

	// The same exports at another size keep the record usable; other exports make it pending,
	// but only when an apply starts with them.
	g.Expect(EnsureApply(ctx, env.Client, owner, render(`{ "attachment" : "a1" }`, 3))).To(BeTrue())
	g.Expect(read()).To(Equal(kept))
	b := render(`{"attachment": "a2"}`, 3)
	g.Expect(Ensure(ctx, env.Client, owner, b)).To(BeTrue())
	g.Expect(read()).To(Equal(kept), "Ensure alone marks nothing")
	g.Expect(EnsureApply(ctx, env.Client, owner, b)).To(BeTrue(), "the same inputs, an apply of them starting")
	got := read()
	g.Expect(got.Pending).To(Equal(b.Hash))
	g.Expect(got.Exports).To(Equal(kept.Exports), "the exports stay until the controller settles them")
	g.Expect(got.Usable()).To(BeFalse())

	// Lost: the data key goes.
	g.Expect(WriteExportsRecord(ctx, env.Client, owner, ExportsRecord{Status: ExportsApplyFailed})).To(BeTrue())
	g.Expect(read()).To(Equal(ExportsRecord{Status: ExportsApplyFailed}))
	stored, err := Read(ctx, env.Client, owner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored.Hash).To(Equal(b.Hash), "the inputs are untouched")
	var none json.RawMessage
	g.Expect(stored.Exports.Exports).To(Equal(none))
}

// A record edited by hand (any Secret writer of the namespace can) that is not one JSON value
// is no record: it never stands in for the exports.
func TestExportsRecordCorrupt(t *testing.T) {
	g := NewWithT(t)
	for _, raw := range []string{`{`, `{"a":1} {"b":2}`, "\xff", `{"a":1}x`} {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{captfv1.ExportsRecordAnnotation: ExportsKept}},
			Data:       map[string][]byte{AppliedExportsKey: []byte(raw)},
		}
		rec := exportsRecordOf(s)
		g.Expect(rec.Usable()).To(BeFalse(), raw)
		g.Expect(rec.Exports).To(BeNil(), raw)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{captfv1.ExportsRecordAnnotation: ExportsKept}},
		Data:       map[string][]byte{AppliedExportsKey: []byte(` { "b" : 1.50, "a" : [ ] } `)},
	}
	g.Expect(string(exportsRecordOf(s).Exports)).To(Equal(`{"a":[],"b":1.50}`), "read back canonical")
}

// FuzzExportsRecord: whatever the Secret holds, reading the record never panics, and a usable
// record's exports are one canonical JSON value.
func FuzzExportsRecord(f *testing.F) {
	for _, seed := range []string{`{}`, `{"a":[1,2.50]}`, `null`, `"x"`, `{`, `[1] 2`, ""} {
		f.Add([]byte(seed), ExportsKept, "")
	}
	f.Fuzz(func(t *testing.T, data []byte, status, pending string) {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
				captfv1.ExportsRecordAnnotation: status, captfv1.ExportsPendingAnnotation: pending}},
			Data: map[string][]byte{AppliedExportsKey: data},
		}
		rec := exportsRecordOf(s)
		if !rec.Usable() {
			return
		}
		again, err := canonicalValue(rec.Exports)
		if err != nil || !bytes.Equal(again, rec.Exports) || !SameExports(rec.Exports, rec.Exports) {
			t.Fatalf("usable record %q is not canonical JSON: %q, %v", rec.Exports, again, err)
		}
	})
}
