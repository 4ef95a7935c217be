// Package status is `kubectl capvco status [CLUSTER]`: a cluster's whitesky.cloud
// infrastructure as CAPVCO recorded it, as a tree (or -o json|yaml).
package status

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// Options are the command's inputs.
type Options struct {
	cmdutil.Deps
	Styles *cmdutil.Styles
	cmdutil.ClusterScope
	Output cmdutil.Format
}

// NewCmd is `kubectl capvco status`.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Deps: f.Deps()}
	cmd := &cobra.Command{
		Use:   "status [CLUSTER]",
		Short: "Show a cluster's cloudspaces, endpoint, load balancer, DNS and machines as a tree",
		Long: `Show, for one Cluster (or every CAPVCO cluster in the namespace), the Cluster's Available
condition as Cluster API reports it (what clusterctl describe shows) and what CAPVCO recorded:
the VCOCluster's own Ready, one cloudspace per site (adopted by name or created), the
control-plane endpoint, the load balancer and the API servers in its pool (the controller keeps
only healthy ones there: the platform's load balancer has no health checks), the DNS record and
its TTL (the platform fixes 3600 s), every machine with its VM id, addresses and vGPU
reservations, and the conditions of the VCOCluster and of the Cluster.

It reads the management cluster only, never whitesky.cloud: it shows what the controllers last
observed.

Exit codes: 0 shown (whatever the objects' state), 2 an error, 3 bad usage.`,
		Example: fmt.Sprintf(`  %[1]s status my-cluster -n team-a
  %[1]s status -A
  %[1]s status my-cluster -o json | jq '.clusters[].machines[] | {name, vmID, gpus}'`, f.Name),
		Args:              cmdutil.MaximumNArgs(1),
		ValidArgsFunction: cmdutil.CompleteNames(f, 1, &clusterv1.ClusterList{}),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.Parse(args); err != nil {
				return err
			}
			opts.Styles = f.Styles()
			if runF != nil {
				return runF(opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	opts.AddFlags(cmd, "Show the clusters of every namespace.")
	cmdutil.AddOutputFlag(cmd, &opts.Output)
	return cmd
}

// Status is the printed shape (kind CAPVCOStatus).
type Status struct {
	cmdutil.TypeMeta `json:",inline"`
	Clusters         []Cluster `json:"clusters"`
}

// Cluster is one VCOCluster, the Cluster API Cluster it belongs to, and its machines.
type Cluster struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"` // the CAPI Cluster
	VCOCluster string `json:"vcoCluster"`
	Location   string `json:"location"`
	// ClusterFound is false when no Cluster API Cluster of that name exists.
	ClusterFound bool `json:"clusterFound"`
	// Available is the Cluster API Cluster's v1beta2 Available condition, what clusterctl
	// describe shows for a Cluster (nil when the Cluster has not reported it, or is missing).
	Available *Condition `json:"available,omitempty"`
	// ClusterConditions are the Cluster API Cluster's v1beta2 conditions.
	ClusterConditions []metav1.Condition `json:"clusterConditions,omitempty"`
	// Ready is the VCOCluster's own Ready condition; Conditions are the VCOCluster's.
	Ready       Condition          `json:"ready"`
	Provisioned bool               `json:"provisioned"`
	Endpoint    string             `json:"endpoint,omitempty"`
	Sites       []Site             `json:"sites"`
	LB          *LoadBalancer      `json:"loadBalancer,omitempty"`
	DNS         *DNS               `json:"dns,omitempty"`
	Machines    []Machine          `json:"machines"`
	Conditions  []metav1.Condition `json:"conditions,omitempty"`
	Deleting    bool               `json:"deleting,omitempty"`
}

// Condition is a condition's gist.
type Condition struct {
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Site is one site's cloudspace.
type Site struct {
	Name       string `json:"name"`
	Location   string `json:"location"`
	Cloudspace string `json:"cloudspace"`
	ID         string `json:"id,omitempty"`
	ExternalIP string `json:"externalIP,omitempty"`
	// Origin is adopted (taken over by name), created, or pending (not recorded yet).
	Origin string `json:"origin"`
}

// LoadBalancer is the control-plane load balancer.
type LoadBalancer struct {
	ID         string   `json:"id"`
	ServerPool string   `json:"serverPool,omitempty"`
	Address    string   `json:"address,omitempty"`
	Members    []Member `json:"members"`
}

// Member is one API server in the pool.
type Member struct {
	Address string `json:"address"`
	// Machine is the VCOMachine with that address, if any.
	Machine string `json:"machine,omitempty"`
}

// DNS is the control-plane record.
type DNS struct {
	Name       string `json:"name"`
	Published  bool   `json:"published"`
	TTLSeconds int32  `json:"ttlSeconds"`
}

// Machine is one VCOMachine.
type Machine struct {
	Name       string               `json:"name"`
	Ready      Condition            `json:"ready"`
	ProviderID string               `json:"providerID,omitempty"`
	VMID       *int64               `json:"vmID,omitempty"`
	Cloudspace string               `json:"cloudspaceID,omitempty"`
	Site       string               `json:"site,omitempty"`
	Addresses  []string             `json:"addresses,omitempty"`
	InLBPool   bool                 `json:"inLoadBalancerPool"`
	GPUs       []capvcov1.GPUStatus `json:"gpus,omitempty"`
	Deleting   bool                 `json:"deleting,omitempty"`
	Conditions []metav1.Condition   `json:"conditions,omitempty"`
}

func run(ctx context.Context, o *Options) error {
	c, ns, err := o.ConnectScope(o.AllNamespaces)
	if err != nil {
		return err
	}
	var vcs capvcov1.VCOClusterList
	if err := c.List(ctx, &vcs, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing VCOClusters: %w", err)
	}
	var ms capvcov1.VCOMachineList
	if err := c.List(ctx, &ms, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing VCOMachines: %w", err)
	}
	var clusters clusterv1.ClusterList
	if err := c.List(ctx, &clusters, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing Clusters: %w", err)
	}
	out := Status{TypeMeta: cmdutil.Meta("CAPVCOStatus"), Clusters: []Cluster{}}
	for i := range vcs.Items {
		vc := &vcs.Items[i]
		cl := ClusterOf(vc)
		if o.Cluster != "" && cl.Name != o.Cluster && vc.Name != o.Cluster {
			continue
		}
		for j := range clusters.Items {
			if capi := &clusters.Items[j]; capi.Namespace == cl.Namespace && capi.Name == cl.Name {
				WithCluster(&cl, capi)
			}
		}
		cl.Machines = MachinesOf(vc, cl.Name, ms.Items)
		attributeMembers(&cl)
		out.Clusters = append(out.Clusters, cl)
	}
	if o.Cluster != "" && len(out.Clusters) == 0 {
		return cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("no VCOCluster of cluster %s in namespace %s %s", o.Cluster, ns,
			cmdutil.NamespaceHint(ns, cmdutil.Elsewhere(ctx, c, ns, o.Cluster, &clusterv1.ClusterList{}, &capvcov1.VCOClusterList{}))))
	}
	return cmdutil.Print(o.IO.Out, o.Output, out, func() error {
		if len(out.Clusters) == 0 {
			fmt.Fprintln(o.IO.Out, "No VCOClusters found.")
			if !o.AllNamespaces {
				fmt.Fprintf(o.IO.Out, "(looked in namespace %s: -n NAMESPACE for another, -A for every namespace)\n", ns)
			}
			return nil
		}
		for i, cl := range out.Clusters {
			if i > 0 {
				fmt.Fprintln(o.IO.Out)
			}
			writeTree(o.IO.Out, o.Styles, cl)
		}
		return nil
	})
}

func clusterOf(vc *capvcov1.VCOCluster) string {
	if n := vc.Labels[clusterv1.ClusterNameLabel]; n != "" {
		return n
	}
	for _, r := range vc.OwnerReferences {
		if r.Kind == "Cluster" {
			return r.Name
		}
	}
	return vc.Name
}

func condition(conds []metav1.Condition, t string) Condition {
	for _, c := range conds {
		if c.Type == t {
			return Condition{Status: string(c.Status), Reason: c.Reason, Message: c.Message}
		}
	}
	return Condition{Status: "Unknown", Reason: "NotReported"}
}

// WithCluster adds what Cluster API reports of the VCOCluster's Cluster: its v1beta2
// conditions, Available among them.
func WithCluster(cl *Cluster, capi *clusterv1.Cluster) {
	cl.ClusterFound = true
	cl.ClusterConditions = capi.Status.Conditions
	if slices.ContainsFunc(capi.Status.Conditions, func(c metav1.Condition) bool { return c.Type == clusterv1.ClusterAvailableCondition }) {
		a := condition(capi.Status.Conditions, clusterv1.ClusterAvailableCondition)
		cl.Available = &a
	}
}

// ClusterOf summarises a VCOCluster (machines are added by MachinesOf).
func ClusterOf(vc *capvcov1.VCOCluster) Cluster {
	cl := Cluster{Namespace: vc.Namespace, Name: clusterOf(vc), VCOCluster: vc.Name, Location: vc.Spec.Location,
		Ready: condition(vc.Status.Conditions, capvcov1.ReadyCondition), Conditions: vc.Status.Conditions,
		Provisioned: vc.Status.Initialization.Provisioned != nil && *vc.Status.Initialization.Provisioned,
		Deleting:    !vc.DeletionTimestamp.IsZero()}
	if ep := vc.Spec.ControlPlaneEndpoint; ep.Host != "" {
		cl.Endpoint = fmt.Sprintf("%s:%d", ep.Host, ep.Port)
	}
	for _, s := range decide.Sites(vc.Spec) {
		site := Site{Name: s.Name, Location: s.Location, Cloudspace: names.Cloudspace(vc.Namespace, cl.Name, s.Name), Origin: "pending"}
		if i := slices.IndexFunc(vc.Status.Cloudspaces, func(c capvcov1.CloudspaceStatus) bool { return c.Site == s.Name }); i >= 0 {
			cs := vc.Status.Cloudspaces[i]
			site.ID, site.ExternalIP, site.Location = cs.ID, cs.ExternalIP, cs.Location
			if cs.Name != "" {
				site.Cloudspace = cs.Name
			}
			site.Origin = "created"
			if cs.Adopted {
				site.Origin = "adopted"
			}
		}
		cl.Sites = append(cl.Sites, site)
	}
	if lb := vc.Status.LoadBalancer; lb != nil {
		cl.LB = &LoadBalancer{ID: lb.ID, ServerPool: lb.ServerPoolID, Address: lb.Address, Members: []Member{}}
		for _, m := range lb.Members {
			cl.LB.Members = append(cl.LB.Members, Member{Address: m})
		}
	}
	if d := vc.Status.DNS; d != nil {
		cl.DNS = &DNS{Name: d.Name, Published: d.Published, TTLSeconds: d.TTLSeconds}
	}
	return cl
}

// MachinesOf returns the VCOMachines of the cluster, marking the load balancer's members.
func MachinesOf(vc *capvcov1.VCOCluster, cluster string, all []capvcov1.VCOMachine) []Machine {
	members := map[string]bool{}
	if vc.Status.LoadBalancer != nil {
		for _, m := range vc.Status.LoadBalancer.Members {
			members[hostOf(m)] = true
		}
	}
	out := []Machine{}
	for _, m := range all {
		if m.Namespace != vc.Namespace || m.Labels[clusterv1.ClusterNameLabel] != cluster {
			continue
		}
		mm := Machine{Name: m.Name, Ready: condition(m.Status.Conditions, capvcov1.ReadyCondition), ProviderID: m.Spec.ProviderID,
			VMID: m.Status.VMID, Cloudspace: m.Status.CloudspaceID, Site: m.Status.FailureDomain, GPUs: m.Status.GPUs,
			Deleting: !m.DeletionTimestamp.IsZero(), Conditions: m.Status.Conditions}
		for _, a := range m.Status.Addresses {
			mm.Addresses = append(mm.Addresses, a.Address)
			if members[a.Address] {
				mm.InLBPool = true
			}
		}
		out = append(out, mm)
	}
	slices.SortFunc(out, func(a, b Machine) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// hostOf strips a port from a pool member ("10.0.0.5:6443").
func hostOf(member string) string {
	if i := strings.LastIndex(member, ":"); i > 0 && !strings.Contains(member[i+1:], ".") {
		return member[:i]
	}
	return member
}

// attributeMembers names the machine behind each pool member.
func attributeMembers(cl *Cluster) {
	if cl.LB == nil {
		return
	}
	for i, m := range cl.LB.Members {
		for _, mm := range cl.Machines {
			if slices.Contains(mm.Addresses, hostOf(m.Address)) {
				cl.LB.Members[i].Machine = mm.Name
			}
		}
	}
}
