package cmdutil

import "testing"

func TestNamespaceHint(t *testing.T) {
	for _, tc := range []struct {
		elsewhere []string
		want      string
	}{
		{nil, "(looked in namespace default: add -n NAMESPACE for another; -A lists every namespace)"},
		{[]string{"quickstart"}, "(it is in namespace quickstart: add -n quickstart)"},
		{[]string{"a", "b"}, "(it is in namespaces a, b: add -n with one of them)"},
	} {
		if got := NamespaceHint("default", tc.elsewhere); got != tc.want {
			t.Errorf("%v: %q", tc.elsewhere, got)
		}
	}
}
