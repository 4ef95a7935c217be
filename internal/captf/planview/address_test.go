package planview

import (
	"slices"
	"strconv"
	"testing"
)

func TestCompareAddresses(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string
		want int
	}{
		{"count index is a number", "r.x[2]", "r.x[10]", -1},
		{"index 1000 after 999", "r.x[1000]", "r.x[999]", 1},
		{"no key before a key", "r.x", "r.x[0]", -1},
		{"number keys before string keys", "r.x[5]", `r.x["a"]`, -1},
		{"string keys in byte order", `r.x["a10"]`, `r.x["a2"]`, -1},
		{"escaped quote in a key", `r.x["a\"b"]`, `r.x["a"]`, 1},
		{"root before a module", "z.z[9]", "module.a.r.x", -1},
		{"shorter module path first", "module.b.r.x", "module.a.module.a.r.x", -1},
		{"module index is a number", "module.m[2].r.x", "module.m[10].r.x", -1},
		{"module name before its index", "module.a[9].r.x", "module.b[0].r.x", -1},
		{"data source before managed resource", "data.z.x", "a.x", -1},
		{"type before name", "a.z", "b.a", -1},
		{"same address", "module.m[1].r.x[3]", "module.m[1].r.x[3]", 0},
		{"unparsed after parsed", "(redacted)", "r.x[0]", 1},
		{"unparsed in byte order", "(b)", "(a)", 1},
		{"leading zero is not an index", "r.x[01]", "r.x[1]", 1},
		{"negative is not an index", "r.x[-1]", "r.x[0]", 1},
		{"unterminated key", `r.x["a]`, "r.x[0]", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CompareAddresses(tc.a, tc.b); got != tc.want {
				t.Errorf("CompareAddresses(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
			}
			if got := CompareAddresses(tc.b, tc.a); got != -tc.want {
				t.Errorf("CompareAddresses(%q, %q) = %d, want %d", tc.b, tc.a, got, -tc.want)
			}
		})
	}
}

// TestCompareAddressesSortsAsTofuShows: the order `tofu show` printed for this configuration
// (bin/tofu v1.12.6: terraform_data with count = 12 and for_each, a module with count = 11).
func TestCompareAddressesSortsAsTofuShows(t *testing.T) {
	want := []string{`terraform_data.m["A"]`, `terraform_data.m["a10"]`, `terraform_data.m["a2"]`, `terraform_data.m["b"]`}
	for i := range 12 {
		want = append(want, "terraform_data.r["+strconv.Itoa(i)+"]")
	}
	for i := range 11 {
		for j := range 3 {
			want = append(want, "module.x["+strconv.Itoa(i)+"].terraform_data.z["+strconv.Itoa(j)+"]")
		}
	}
	got := slices.Clone(want)
	slices.Sort(got) // byte order: r[10] before r[2]
	slices.SortFunc(got, CompareAddresses)
	if !slices.Equal(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// FuzzCompareAddresses: any addresses (a module names them, a view may redact them) compare
// without panicking, and the order is antisymmetric and transitive, so a sort is well defined.
func FuzzCompareAddresses(f *testing.F) {
	f.Add("r.x[2]", "r.x[10]", `module.m["k\"]"].data.t.n`)
	f.Add("module.a[0].module.b.r.x", "(redacted)", `r.x["\u00e9"]`)
	f.Add("data.a.b", "r.x[01]", "r.x[")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		ab, ba := CompareAddresses(a, b), CompareAddresses(b, a)
		if ab != -ba || (ab == 0) != (a == b) {
			t.Fatalf("not antisymmetric: (%q, %q) = %d, reversed %d", a, b, ab, ba)
		}
		s := []string{a, b, c}
		slices.SortFunc(s, CompareAddresses)
		if CompareAddresses(s[0], s[1]) > 0 || CompareAddresses(s[1], s[2]) > 0 || CompareAddresses(s[0], s[2]) > 0 {
			t.Fatalf("not transitive: %q", s)
		}
	})
}
