package cmdutil

import (
	"testing"

	"github.com/spf13/cobra"
)

func TestClusterScope(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		flags   []string
		cluster string
		all     bool
		usage   bool
	}{
		{name: "no argument shows the namespace"},
		{name: "one cluster", args: []string{"c1"}, cluster: "c1"},
		{name: "every namespace", flags: []string{"-A"}, all: true},
		{name: "a cluster and -A is bad usage", args: []string{"c1"}, flags: []string{"--all-namespaces"}, usage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s ClusterScope
			cmd := &cobra.Command{Use: "x"}
			s.AddFlags(cmd, "every namespace")
			if err := cmd.Flags().Parse(tc.flags); err != nil {
				t.Fatal(err)
			}
			err := s.Parse(tc.args)
			if tc.usage {
				if CodeOf(err) != ExitUsage {
					t.Fatalf("want a usage error, got %v", err)
				}
				return
			}
			if err != nil || s.Cluster != tc.cluster || s.AllNamespaces != tc.all {
				t.Fatalf("got %+v, %v; want cluster %q all %v", s, err, tc.cluster, tc.all)
			}
		})
	}
}
