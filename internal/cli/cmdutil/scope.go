package cmdutil

import "github.com/spf13/cobra"

// ClusterScope is what a command that shows clusters looks at: one cluster (the optional
// CLUSTER argument), every cluster of the namespace, or with -A every cluster of every
// namespace. Embed it in the command's Options, register it with AddFlags and fill it in RunE
// with Parse.
type ClusterScope struct {
	// Cluster is the CLUSTER argument; empty for every cluster.
	Cluster string
	// AllNamespaces is -A/--all-namespaces.
	AllNamespaces bool
}

// AddFlags registers -A/--all-namespaces with the command's own usage text.
func (s *ClusterScope) AddFlags(cmd *cobra.Command, usage string) {
	cmd.Flags().BoolVarP(&s.AllNamespaces, "all-namespaces", "A", false, usage)
}

// Parse reads the CLUSTER argument (the command takes at most one: see MaximumNArgs) and
// refuses a cluster name together with -A, a bad usage.
func (s *ClusterScope) Parse(args []string) error {
	if len(args) > 0 {
		s.Cluster = args[0]
	}
	if s.AllNamespaces && s.Cluster != "" {
		return Usagef("CLUSTER and --all-namespaces exclude each other")
	}
	return nil
}
