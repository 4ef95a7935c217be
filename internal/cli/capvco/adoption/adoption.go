// Package adoption is `kubectl capvco adoption [CLUSTER]`: which cloudspaces CAPVCO adopted by
// name, whether one already ran VMs when it was adopted (the AdoptedLiveCloudspace incident),
// and VCOClusters that map to the same cloudspace, here or in another management cluster.
//
// Adoption by deterministic name is what lets a cluster find its infrastructure again after
// clusterctl move, and the platform cannot tell that recovery from a duplicate: two VCOClusters
// that map to one cloudspace both manage it, and deleting either destroys it.
package adoption

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/cli/capvco/status"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/cli/move"
)

// Options are the command's inputs.
type Options struct {
	cmdutil.Deps
	Styles *cmdutil.Styles
	cmdutil.ClusterScope
	// Compare are kubeconfigs of other management clusters whose VCOClusters are checked for
	// the same cloudspaces.
	Compare []string
	// CompareClient builds their clients.
	CompareClient func(path, context string) (client.Client, error)
	Output        cmdutil.Format
}

// NewCmd is `kubectl capvco adoption`.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Deps: f.Deps(), CompareClient: move.TargetClient}
	cmd := &cobra.Command{
		Use:   "adoption [CLUSTER]",
		Short: "Report adopted cloudspaces and adoption incidents (a live cloudspace adopted, two VCOClusters on one cloudspace)",
		Long: `Show, per site, whether CAPVCO created the cloudspace or adopted an existing one by its
deterministic name (capvco_<namespace>_<cluster>_<site>), and report the incidents:

  AdoptedLiveCloudspace  the adopted cloudspace already ran VMs. After a clusterctl move of this
                         very cluster that is expected; otherwise another VCOCluster or another
                         management cluster manages the same infrastructure. Read from the
                         VCOCluster's Warning events, which the API server keeps for an hour by
                         default: an older incident shows only as "adopted".
  SharedCloudspace       two VCOClusters map to the same cloudspace (name and location, or id),
                         in this management cluster or in one given with --compare-kubeconfig.
                         Deleting either destroys the cloudspace under the other.

Exit codes: 0 no incident, 1 an incident, 2 an error, 3 bad usage.`,
		Example: fmt.Sprintf(`  %[1]s adoption my-cluster -n team-a
  %[1]s adoption -A --compare-kubeconfig other-mgmt.kubeconfig
  %[1]s adoption -A -o json | jq '.incidents[]'`, f.Name),
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
	opts.AddFlags(cmd, "Report the clusters of every namespace.")
	cmd.Flags().StringSliceVar(&opts.Compare, "compare-kubeconfig", nil, "Kubeconfig of another management cluster to look for VCOClusters on the same cloudspaces (repeatable).")
	_ = cmd.MarkFlagFilename("compare-kubeconfig")
	cmdutil.AddOutputFlag(cmd, &opts.Output)
	return cmd
}

// Report is the printed shape (kind CAPVCOAdoption).
type Report struct {
	cmdutil.TypeMeta `json:",inline"`
	Sites            []Site     `json:"sites"`
	Incidents        []Incident `json:"incidents"`
}

// Site is one site's cloudspace of one VCOCluster.
type Site struct {
	// Source is "" for this management cluster, else the --compare-kubeconfig path.
	Source     string `json:"source,omitempty"`
	Namespace  string `json:"namespace"`
	Cluster    string `json:"cluster"`
	VCOCluster string `json:"vcoCluster"`
	Site       string `json:"site"`
	Location   string `json:"location"`
	Cloudspace string `json:"cloudspace"`
	ID         string `json:"id,omitempty"`
	// Origin is adopted, created or pending.
	Origin string `json:"origin"`
	// LiveAtAdoption is true when an AdoptedLiveCloudspace event names this site.
	LiveAtAdoption bool `json:"liveAtAdoption"`
}

// Incident is one thing to treat as an incident.
type Incident struct {
	Type    string     `json:"type"` // AdoptedLiveCloudspace or SharedCloudspace
	Message string     `json:"message"`
	Last    *time.Time `json:"last,omitempty"`
	Count   int32      `json:"count,omitempty"`
}

// Incident types.
const (
	AdoptedLive = capvcov1.AdoptedLiveCloudspaceEvent
	Shared      = "SharedCloudspace"
)

func run(ctx context.Context, o *Options) error {
	c, ns, err := o.ConnectScope(o.AllNamespaces)
	if err != nil {
		return err
	}
	rep := Report{TypeMeta: cmdutil.Meta("CAPVCOAdoption"), Sites: []Site{}, Incidents: []Incident{}}
	// Sharing is checked against every VCOCluster visible, not only the ones reported.
	var all []Site
	local, err := sites(ctx, c, "", "")
	if apierrors.IsForbidden(err) && ns != "" {
		local, err = sites(ctx, c, ns, "") // no cluster-wide read: compare within the namespace
	}
	if err != nil {
		return err
	}
	all = append(all, local...)
	for _, path := range o.Compare {
		oc, err := o.CompareClient(path, "")
		if err != nil {
			return fmt.Errorf("--compare-kubeconfig %s: %w", path, err)
		}
		other, err := sites(ctx, oc, "", path)
		if err != nil {
			return fmt.Errorf("--compare-kubeconfig %s: %w", path, err)
		}
		all = append(all, other...)
	}
	for _, s := range local {
		if (ns == "" || s.Namespace == ns) && (o.Cluster == "" || s.Cluster == o.Cluster || s.VCOCluster == o.Cluster) {
			rep.Sites = append(rep.Sites, s)
		}
	}
	if o.Cluster != "" && len(rep.Sites) == 0 {
		return cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("no VCOCluster of cluster %s in namespace %s", o.Cluster, ns))
	}
	live, err := liveIncidents(ctx, c, rep.Sites)
	if err != nil {
		return err
	}
	rep.Incidents = append(rep.Incidents, live...)
	rep.Incidents = append(rep.Incidents, Sharing(rep.Sites, all)...)
	if err := cmdutil.Print(o.IO.Out, o.Output, rep, func() error { return write(o, rep) }); err != nil {
		return err
	}
	if len(rep.Incidents) > 0 {
		return cmdutil.ErrFound
	}
	return nil
}

// sites lists every VCOCluster's sites on one management cluster.
func sites(ctx context.Context, c client.Reader, ns, source string) ([]Site, error) {
	var list capvcov1.VCOClusterList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing VCOClusters: %w", err)
	}
	var out []Site
	for i := range list.Items {
		cl := status.ClusterOf(&list.Items[i])
		for _, s := range cl.Sites {
			out = append(out, Site{Source: source, Namespace: cl.Namespace, Cluster: cl.Name, VCOCluster: cl.VCOCluster, Site: s.Name,
				Location: s.Location, Cloudspace: s.Cloudspace, ID: s.ID, Origin: s.Origin})
		}
	}
	return out, nil
}

// liveIncidents reads the AdoptedLiveCloudspace events of the reported VCOClusters and marks
// the sites they name.
func liveIncidents(ctx context.Context, c client.Reader, ss []Site) ([]Incident, error) {
	var out []Incident
	seen := map[string]bool{}
	for i := range ss {
		key := ss[i].Namespace + "/" + ss[i].VCOCluster
		if seen[key] {
			continue
		}
		seen[key] = true
		var evs corev1.EventList
		if err := c.List(ctx, &evs, client.InNamespace(ss[i].Namespace), client.MatchingFields{
			"involvedObject.kind": "VCOCluster", "involvedObject.name": ss[i].VCOCluster, "reason": capvcov1.AdoptedLiveCloudspaceEvent,
		}); err != nil {
			return nil, fmt.Errorf("listing the events of VCOCluster %s: %w", key, err)
		}
		for _, ev := range evs.Items {
			for j := range ss {
				if ss[j].Namespace+"/"+ss[j].VCOCluster == key && strings.Contains(ev.Message, " of site "+ss[j].Site+" ") {
					ss[j].LiveAtAdoption = true
				}
			}
			last := ev.LastTimestamp.Time
			if last.IsZero() {
				last = ev.EventTime.Time
			}
			in := Incident{Type: AdoptedLive, Message: fmt.Sprintf("VCOCluster %s: %s", key, ev.Message), Count: max(ev.Count, 1)}
			if !last.IsZero() {
				in.Last = &last
			}
			out = append(out, in)
		}
	}
	return out, nil
}

// Sharing finds the reported sites whose cloudspace (location and name, or id) another
// VCOCluster in all also maps to. It is pure.
func Sharing(reported, all []Site) []Incident {
	var out []Incident
	done := map[string]bool{}
	for _, s := range reported {
		var others []string
		for _, o := range all {
			if o.Source == s.Source && o.Namespace == s.Namespace && o.VCOCluster == s.VCOCluster {
				continue
			}
			if (o.Location == s.Location && o.Cloudspace == s.Cloudspace) || (s.ID != "" && o.ID == s.ID && o.Location == s.Location) {
				where := ""
				if o.Source != "" {
					where = " in " + o.Source
				}
				others = append(others, fmt.Sprintf("VCOCluster %s/%s%s (site %s)", o.Namespace, o.VCOCluster, where, o.Site))
			}
		}
		key := s.Location + "/" + s.Cloudspace
		if len(others) == 0 || done[key] {
			continue
		}
		done[key] = true
		slices.Sort(others)
		out = append(out, Incident{Type: Shared, Message: fmt.Sprintf(
			"cloudspace %s in %s is mapped by VCOCluster %s/%s (site %s) and by %s: each manages it, and deleting either destroys it",
			s.Cloudspace, s.Location, s.Namespace, s.VCOCluster, s.Site, strings.Join(others, ", "))})
	}
	return out
}

func write(o *Options, rep Report) error {
	w, st := o.IO.Out, o.Styles
	if len(rep.Sites) == 0 {
		fmt.Fprintln(w, "No VCOClusters found.")
		return nil
	}
	rows := [][]string{{"NAMESPACE", "CLUSTER", "SITE", "LOCATION", "CLOUDSPACE", "ID", "ORIGIN", "LIVE AT ADOPTION"}}
	for _, s := range rep.Sites {
		liveAt := "-"
		if s.Origin == "adopted" {
			liveAt = "no event"
		}
		if s.LiveAtAdoption {
			liveAt = "yes"
		}
		cl := s.Cluster
		if s.VCOCluster != s.Cluster {
			cl += " (" + s.VCOCluster + ")"
		}
		rows = append(rows, []string{s.Namespace, cl, s.Site, s.Location, s.Cloudspace, orDash(s.ID), s.Origin, liveAt})
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			cell := c
			if i < len(r)-1 {
				cell += strings.Repeat(" ", widths[i]-len(c)+2)
			}
			switch {
			case i == 6 && c == "adopted":
				cell = st.Info(cell)
			case i == 7 && c == "yes":
				cell = st.Bad(cell)
			}
			b.WriteString(cell)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	fmt.Fprintln(w)
	if len(rep.Incidents) == 0 {
		fmt.Fprintln(w, st.OK("No adoption incidents."))
		return nil
	}
	fmt.Fprintf(w, "%s\n", st.Bad(fmt.Sprintf("%d incident(s):", len(rep.Incidents))))
	for _, in := range rep.Incidents {
		line := fmt.Sprintf("  %s: %s", in.Type, in.Message)
		if in.Count > 1 {
			line += fmt.Sprintf(" (%d times)", in.Count)
		}
		fmt.Fprintln(w, line)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
