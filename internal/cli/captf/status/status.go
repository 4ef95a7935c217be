// Package status is `kubectl captf status [CLUSTER]`: a tree like clusterctl describe cluster
// of the CAPTF objects of each Cluster, with their Jobs, last runs, state serials, pending
// plans, backups and conditions.
package status

import (
	"context"
	"fmt"
	"sort"
	"time"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/cli/captf/objects"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// Options are the command's inputs.
type Options struct {
	cmdutil.Deps
	Styles *cmdutil.Styles
	Now    func() time.Time

	cmdutil.ClusterScope
	ShowConditions string
	Grouping       bool
	Output         cmdutil.Format
}

// NewCmd returns the command; runF replaces run in tests.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Deps: f.Deps(), Now: time.Now}
	cmd := &cobra.Command{
		Use:   "status [CLUSTER]",
		Short: "Show the CAPTF objects of a cluster as a tree, like clusterctl describe cluster",
		Long: `Show, for one Cluster (or every Cluster in the namespace), its TerraformCluster,
TerraformMachinePools and TerraformMachines as a tree. The Cluster's row shows its Available
condition, as clusterctl describe does (Cluster API v1beta2); each CAPTF object's row its own
Ready and its reason, the running Job, the last run and its changes, the state serial, the plan
waiting for approval, the number of state backups, and how long ago Ready changed.
TerraformMachines in the same state are grouped into one row (--grouping=false lists each).
--show-conditions adds every condition of all objects (the Cluster's included), or of one kind,
as child rows, coloured by polarity.

Exit codes: 0 shown (whatever the objects' state), 2 an error, 3 bad usage.`,
		Example: fmt.Sprintf(`  %[1]s status my-cluster -n team-a
  %[1]s status -A
  %[1]s status my-cluster --show-conditions all --grouping=false
  %[1]s status my-cluster -o json | jq '.clusters[].objects[] | select(.ready != "True") | .name'`, f.Name),
		Args:              cmdutil.MaximumNArgs(1),
		ValidArgsFunction: cmdutil.CompleteNames(f, 1, &clusterv1.ClusterList{}),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.Parse(args); err != nil {
				return err
			}
			if sc := opts.ShowConditions; sc != "" && !ValidShowConditions(sc) {
				return cmdutil.Usagef("--show-conditions %q: use all or a kind (Cluster, TerraformCluster, TerraformMachinePool, TerraformMachine, or tfc, tfmp, tfm)", sc)
			}
			opts.Styles = f.Styles()
			if runF != nil {
				return runF(opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	opts.AddFlags(cmd, "Show the clusters of every namespace.")
	cmd.Flags().StringVar(&opts.ShowConditions, "show-conditions", "", "List every condition of all objects (all) or of one kind (Cluster, TerraformMachine, tfm, ...).")
	cmd.Flags().BoolVar(&opts.Grouping, "grouping", true, "Group TerraformMachines in the same state into one row.")
	kinds := []string{"all", "Cluster"}
	for _, k := range captfv1.Kinds {
		kinds = append(kinds, k.Kind)
	}
	_ = cmd.RegisterFlagCompletionFunc("show-conditions", cobra.FixedCompletions(kinds, cobra.ShellCompDirectiveNoFileComp))
	cmdutil.AddOutputFlag(cmd, &opts.Output)
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	c, ns, err := opts.ConnectScope(opts.AllNamespaces)
	if err != nil {
		return err
	}
	s, err := Gather(ctx, c, ns, opts.Cluster)
	if err != nil {
		return err
	}
	if opts.Cluster != "" && len(s.Clusters) == 0 {
		return cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("no Cluster %s and no CAPTF objects of it in namespace %s %s", opts.Cluster, ns,
			cmdutil.NamespaceHint(ns, cmdutil.Elsewhere(ctx, c, ns, opts.Cluster, &clusterv1.ClusterList{}))))
	}
	return cmdutil.Print(opts.IO.Out, opts.Output, s, func() error {
		Render(opts.IO.Out, opts.Styles, s, TreeOptions{ShowConditions: opts.ShowConditions, Grouping: opts.Grouping, Now: opts.Now()})
		if len(s.Clusters) == 0 && !opts.AllNamespaces {
			fmt.Fprintf(opts.IO.Out, "(looked in namespace %s: -n NAMESPACE for another, -A for every namespace)\n", ns)
		}
		return nil
	})
}

// FromCluster fills cl with what Cluster API reports of c: its v1beta2 conditions, Available
// (the condition clusterctl describe shows for a Cluster) among them, and the v1beta1 Ready
// condition CAPI still keeps under status.deprecated.v1beta1.
func FromCluster(cl *Cluster, c *clusterv1.Cluster) {
	cl.Found = true
	cl.Conditions = c.Status.Conditions
	if a := objects.Condition(c.Status.Conditions, clusterv1.ClusterAvailableCondition); a != nil {
		cl.Available = a.DeepCopy()
	}
	if d := c.Status.Deprecated; d != nil && d.V1Beta1 != nil {
		for _, cond := range d.V1Beta1.Conditions {
			if cond.Type == clusterv1.ReadyV1Beta1Condition {
				cl.Ready, cl.Reason = string(cond.Status), cond.Reason
			}
		}
	}
}

// Gather reads the CAPI Clusters and CAPTF objects of namespace ("" for all), or of one
// cluster, with one list per kind.
func Gather(ctx context.Context, c client.Reader, namespace, cluster string) (Status, error) {
	s := Status{TypeMeta: cmdutil.Meta("ClusterStatus"), Clusters: []Cluster{}}
	var objs []*objects.Object
	var err error
	var clusters []clusterv1.Cluster
	if cluster != "" {
		if objs, err = objects.OfCluster(ctx, c, namespace, cluster); err != nil {
			return s, err
		}
		cl := clusterv1.Cluster{}
		switch err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster}, &cl); {
		case err == nil:
			clusters = append(clusters, cl)
		case !apierrors.IsNotFound(err):
			return s, fmt.Errorf("read Cluster %s/%s: %w", namespace, cluster, err)
		}
	} else {
		if objs, err = objects.List(ctx, c, namespace); err != nil {
			return s, err
		}
		var list clusterv1.ClusterList
		if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return s, fmt.Errorf("list Clusters: %w", err)
		}
		clusters = list.Items
	}
	byKey := map[string]*Cluster{}
	var order []string
	add := func(ns, name string) *Cluster {
		k := ns + "/" + name
		if cl, ok := byKey[k]; ok {
			return cl
		}
		byKey[k] = &Cluster{Namespace: ns, Name: name, Objects: []Object{}}
		order = append(order, k)
		return byKey[k]
	}
	for i := range clusters {
		cl := add(clusters[i].Namespace, clusters[i].Name)
		FromCluster(cl, &clusters[i])
	}
	for _, o := range objs {
		name := o.Cluster
		if name == "" {
			name = "(no cluster label)"
		}
		cl := add(o.Namespace(), name)
		cl.Objects = append(cl.Objects, FromObject(o))
	}
	sort.Strings(order)
	for _, k := range order {
		if cl := byKey[k]; cluster != "" || len(cl.Objects) > 0 {
			s.Clusters = append(s.Clusters, *cl)
		}
	}
	return s, nil
}
