package planview

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"
	corev1 "k8s.io/api/core/v1"
)

func loadPlan(t testing.TB, path string) *tfjson.Plan {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := &tfjson.Plan{}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFromPlan(t *testing.T) {
	v := FromPlan(loadPlan(t, "testdata/plan.json"), nil)
	var got []string
	for _, c := range v.Changes {
		got = append(got, c.Action+" "+c.Address)
	}
	want := []string{
		"delete terraform_data.old", "replace terraform_data.server[0]", "forget terraform_data.dropped",
		"update terraform_data.db", "create terraform_data.fresh",
		"no-op terraform_data.adopted", "no-op terraform_data.renamed",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("changes:\n%s", strings.Join(got, "\n"))
	}
	byAddr := map[string]ResourceChange{}
	for _, c := range v.Changes {
		byAddr[c.Address] = c
	}
	srv := byAddr["terraform_data.server[0]"]
	if srv.ReplaceOrder != "delete-then-create" || srv.Reason != "replace_because_cannot_update" || len(srv.ReplacePaths) != 1 || srv.ReplacePaths[0] != "triggers_replace" {
		t.Fatalf("replace: %+v", srv)
	}
	attrs := map[string]AttributeChange{}
	for _, a := range srv.Attributes {
		attrs[a.Path] = a
	}
	if a := attrs["input.size"]; *a.Before != `"small"` || *a.After != `"large"` {
		t.Fatalf("input.size %+v", a)
	}
	if a := attrs["triggers_replace[0]"]; !a.ForcesReplacement || *a.After != `"v2"` {
		t.Fatalf("triggers_replace %+v", a)
	}
	if a := attrs["id"]; *a.After != Unknown {
		t.Fatalf("id %+v", a)
	}
	if a := attrs["output"]; a.Before == nil || *a.Before != `{"size":"small"}` || *a.After != Unknown {
		t.Fatalf("a value that becomes unknown is one change: %+v", srv.Attributes)
	}
	if _, ok := attrs["output.size"]; ok {
		t.Fatal("leaves of a value that becomes unknown listed one by one")
	}
	if _, ok := attrs["input.zone"]; ok {
		t.Fatal("unchanged attribute listed")
	}
	db := byAddr["terraform_data.db"]
	dbAttrs := map[string]AttributeChange{}
	for _, a := range db.Attributes {
		dbAttrs[a.Path] = a
	}
	if a := dbAttrs["input.password"]; a.Before == nil || *a.Before != Sensitive || *a.After != Sensitive {
		t.Fatalf("a changed sensitive value must be listed, masked: %+v", db.Attributes)
	}
	if a := dbAttrs["input.tags.team"]; a.Before != nil || *a.After != `"a"` {
		t.Fatalf("added attribute %+v", a)
	}
	if byAddr["terraform_data.renamed"].MovedFrom != "terraform_data.original" || !byAddr["terraform_data.adopted"].Imported {
		t.Fatal("moved/imported lost")
	}
	if len(v.Outputs) != 2 || v.Outputs[0].Name != "endpoint" || *v.Outputs[0].After != Unknown || *v.Outputs[1].After != Sensitive {
		t.Fatalf("outputs %+v", v.Outputs)
	}
	b, _ := json.Marshal(v)
	for _, secret := range []string{"hunter2", "tok-very-secret"} {
		if bytes.Contains(b, []byte(secret)) {
			t.Fatalf("%s leaked into the view", secret)
		}
	}
}

func TestRedactorApplies(t *testing.T) {
	v := FromPlan(loadPlan(t, "testdata/plan.json"), func(s string) string { return strings.ReplaceAll(s, "small", "[redacted]") })
	b, _ := json.Marshal(v)
	if bytes.Contains(b, []byte("small")) || !bytes.Contains(b, []byte("[redacted]")) {
		t.Fatal("redactor not applied to values")
	}
}

func TestPlanName(t *testing.T) {
	n := PlanName("web", "captf-c-web-plan-a1-abcdef", "p2:00")
	if !strings.HasPrefix(n, "web-") || len(n) != len("web-")+10 || n != PlanName("web", "captf-c-web-plan-a1-abcdef", "p2:00") {
		t.Fatal(n)
	}
	if len(PlanName(strings.Repeat("x", 253), "j", "h")) != 253 {
		t.Fatal("long names not cut")
	}
}

func bigView(n int) *View {
	v := &View{FormatVersion: FormatVersion}
	for i := range n {
		c := ResourceChange{Address: "terraform_data.r[" + strings.Repeat("9", i%7) + "]", Action: ActionUpdate}
		for j := range 20 {
			b, a := strings.Repeat("b", 40)+string(rune('a'+j%26)), strings.Repeat("a", 40)+string(rune(i%90+32))
			c.Attributes = append(c.Attributes, AttributeChange{Path: "input.k" + string(rune('a'+j)), Before: &b, After: &a})
		}
		v.Changes = append(v.Changes, c)
	}
	v.TotalChanges = n
	return v
}

func TestSecretRoundTrip(t *testing.T) {
	for _, n := range []int{0, 3, 5000} {
		v := bigView(n)
		secrets, err := Encode(v, "web-0123456789", "ns", map[string]string{"a": "b"})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			if len(s.Data[DataKey]) > MaxChunkBytes || s.Labels[Label] != "true" || s.Labels["a"] != "b" {
				t.Fatalf("chunk %s: %d bytes, labels %v", s.Name, len(s.Data[DataKey]), s.Labels)
			}
		}
		got, err := Decode("web-0123456789", secrets)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Changes) != n || got.Truncated {
			t.Fatalf("%d: got %d changes, truncated %v", n, len(got.Changes), got.Truncated)
		}
	}
}

func TestSecretTruncatesToFit(t *testing.T) {
	v := &View{FormatVersion: FormatVersion}
	// Random-looking values do not compress: far more than fits.
	seed := uint64(1)
	for i := range 2000 {
		c := ResourceChange{Address: "r" + string(rune(i)), Action: ActionCreate}
		for range 10 {
			var b strings.Builder
			for range 64 {
				seed = seed*6364136223846793005 + 1442695040888963407
				b.WriteByte(byte('a' + seed>>59))
			}
			s := b.String()
			c.Attributes = append(c.Attributes, AttributeChange{Path: "x", After: &s})
		}
		v.Changes = append(v.Changes, c)
	}
	v.TotalChanges = len(v.Changes)
	// 16 KiB chunks, at most 4: the same code as Encode's limits, at a size a test can fill.
	secrets, err := encode(v, "p", "ns", nil, 16<<10, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(secrets) > 4 {
		t.Fatalf("%d chunks", len(secrets))
	}
	got, err := Decode("p", secrets)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Truncated || got.TotalChanges != 2000 || !got.Changes[0].AttributesOmitted {
		t.Fatalf("truncated %v total %d", got.Truncated, got.TotalChanges)
	}
}

func TestDecodeRefusesBadChunks(t *testing.T) {
	secrets, err := Encode(bigView(10), "p", "ns", nil)
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(s []*corev1.Secret) []*corev1.Secret) error {
		cp := make([]*corev1.Secret, len(secrets))
		for i, s := range secrets {
			cp[i] = s.DeepCopy()
		}
		_, err := Decode("p", f(cp))
		return err
	}
	for name, f := range map[string]func(s []*corev1.Secret) []*corev1.Secret{
		"no secrets":    func([]*corev1.Secret) []*corev1.Secret { return nil },
		"wrong plan":    func(s []*corev1.Secret) []*corev1.Secret { s[0].Annotations[PlanAnnotation] = "q"; return s },
		"bad count":     func(s []*corev1.Secret) []*corev1.Secret { s[0].Annotations[ChunksAnnotation] = "99"; return s },
		"extra chunk":   func(s []*corev1.Secret) []*corev1.Secret { return append(s, s[0]) },
		"changed data":  func(s []*corev1.Secret) []*corev1.Secret { s[0].Data[DataKey][20] ^= 1; return s },
		"empty data":    func(s []*corev1.Secret) []*corev1.Secret { s[0].Data = nil; return s },
		"wrong version": func(s []*corev1.Secret) []*corev1.Secret { return reencode(t, &View{FormatVersion: 2}) },
	} {
		if err := mutate(f); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func reencode(t *testing.T, v *View) []*corev1.Secret {
	s, err := Encode(v, "p", "ns", nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
