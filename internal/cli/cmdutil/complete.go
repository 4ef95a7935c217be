package cmdutil

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// completionTimeout bounds how long a shell waits for names from the cluster.
const completionTimeout = 5 * time.Second

// CompleteNames completes the first max positional arguments with the names of objects of the
// given list kinds in the namespace (-n or the context's). A cluster that cannot be reached
// completes nothing rather than failing the shell.
func CompleteNames(f *Factory, max int, lists ...client.ObjectList) cobra.CompletionFunc {
	return CompleteMatching(f, max, nil, lists...)
}

// CompleteMatching is CompleteNames for the objects keep accepts (every one when keep is nil),
// for a command that acts on some objects of a kind only (approve: the plans still waiting).
func CompleteMatching(f *Factory, max int, keep func(client.Object) bool, lists ...client.ObjectList) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) >= max {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := f.Client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ns, err := f.Namespace()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		seen := map[string]bool{}
		var names []cobra.Completion
		for _, l := range lists {
			l = l.DeepCopyObject().(client.ObjectList)
			if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
				continue
			}
			items, err := meta.ExtractList(l)
			if err != nil {
				continue
			}
			for _, it := range items {
				o, ok := it.(client.Object)
				if !ok || (keep != nil && !keep(o)) {
					continue
				}
				n := o.GetName()
				if strings.HasPrefix(n, toComplete) && !seen[n] && !slices.Contains(args, n) {
					seen[n] = true
					names = append(names, n)
				}
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
