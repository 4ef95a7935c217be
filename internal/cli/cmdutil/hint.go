package cmdutil

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NamespaceHint is what a "not found in namespace ns" message adds, so that a forgotten -n
// is found: the namespaces where the name exists (elsewhere), or how to look in every one.
func NamespaceHint(ns string, elsewhere []string) string {
	switch len(elsewhere) {
	case 0:
		return fmt.Sprintf("(looked in namespace %s: add -n NAMESPACE for another; -A lists every namespace)", ns)
	case 1:
		return fmt.Sprintf("(it is in namespace %s: add -n %s)", elsewhere[0], elsewhere[0])
	}
	return fmt.Sprintf("(it is in namespaces %s: add -n with one of them)", strings.Join(elsewhere, ", "))
}

// Elsewhere lists the namespaces other than ns that hold an object named name of one of the
// list kinds, for NamespaceHint. It asks the API server with a field selector on the name; a
// list that fails (no right to list every namespace, say) adds nothing.
func Elsewhere(ctx context.Context, c client.Reader, ns, name string, lists ...client.ObjectList) []string {
	var out []string
	for _, l := range lists {
		l = l.DeepCopyObject().(client.ObjectList)
		if err := c.List(ctx, l, client.MatchingFields{"metadata.name": name}); err != nil {
			continue
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			continue
		}
		for _, it := range items {
			o, ok := it.(client.Object)
			if ok && o.GetName() == name && o.GetNamespace() != ns && !slices.Contains(out, o.GetNamespace()) {
				out = append(out, o.GetNamespace())
			}
		}
	}
	slices.Sort(out)
	return out
}
