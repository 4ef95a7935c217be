package status

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/cli/captf/objects"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// Status is the printed shape (kind ClusterStatus).
type Status struct {
	cmdutil.TypeMeta `json:",inline"`
	Clusters         []Cluster `json:"clusters"`
}

// Cluster is one CAPI Cluster and its CAPTF objects.
type Cluster struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Found is false when no CAPI Cluster of that name exists (objects labelled for it do).
	Found bool `json:"found"`
	// Ready and Reason are the Cluster's v1beta1 Ready condition, which Cluster API keeps
	// under status.deprecated.v1beta1 (empty once it no longer does).
	Ready  string `json:"ready,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Available is the Cluster's v1beta2 Available condition: what clusterctl describe shows
	// for a Cluster.
	Available *metav1.Condition `json:"available,omitempty"`
	// Conditions are the Cluster's v1beta2 conditions (status.conditions).
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	Objects    []Object           `json:"objects"`
}

// Object is one CAPTF object's status.
type Object struct {
	Kind        string                `json:"kind"`
	Name        string                `json:"name"`
	Ready       string                `json:"ready"`
	Reason      string                `json:"reason,omitempty"`
	Message     string                `json:"message,omitempty"`
	Since       *metav1.Time          `json:"since,omitempty"`
	Paused      bool                  `json:"paused,omitempty"`
	Deleting    bool                  `json:"deleting,omitempty"`
	ActiveJob   *captfv1.JobReference `json:"activeJob,omitempty"`
	LastRun     *captfv1.RunSummary   `json:"lastRun,omitempty"`
	StateSerial *int64                `json:"stateSerial,omitempty"`
	PendingPlan string                `json:"pendingPlan,omitempty"`
	Backups     int                   `json:"backups"`
	Conditions  []metav1.Condition    `json:"conditions,omitempty"`
}

// negative conditions are bad when True: CAPTF's own and Cluster API's (as clusterctl describe
// colours them).
var negative = map[string]bool{
	captfv1.DriftDetectedCondition: true, captfv1.DeletionBlockedCondition: true, "Paused": true, "Deleting": true,
	"RollingOut": true, "ScalingUp": true, "ScalingDown": true, "Remediating": true,
}

// FromObject summarises one CAPTF object.
func FromObject(o *objects.Object) Object {
	out := Object{Kind: o.Kind, Name: o.Name(), Ready: "Unknown", ActiveJob: o.Status.ActiveJob, LastRun: o.Status.LastRun,
		StateSerial: o.Status.ObservedStateSerial, Backups: len(o.Status.StateBackups), Conditions: o.Conditions,
		Deleting: !o.Obj.GetDeletionTimestamp().IsZero()}
	if r := objects.Condition(o.Conditions, captfv1.ReadyCondition); r != nil {
		out.Ready, out.Reason, out.Message, out.Since = string(r.Status), r.Reason, r.Message, &r.LastTransitionTime
	}
	if p := objects.Condition(o.Conditions, "Paused"); p != nil && p.Status == metav1.ConditionTrue {
		out.Paused = true
	}
	if o.Status.PendingPlanRef != nil {
		out.PendingPlan = o.Status.PendingPlanRef.Name
	}
	return out
}

// row is one line of the tree.
type row struct {
	prefix  string
	name    string
	ready   string
	reason  string
	job     string
	lastRun string
	serial  string
	plan    string
	backups string
	since   string
	message string
	// condition rows colour by polarity; object rows by Ready.
	negative bool
}

// TreeOptions shape the tree.
type TreeOptions struct {
	// ShowConditions: "" none, "all", or a kind (Cluster, TerraformMachine) whose objects list
	// every condition as child rows.
	ShowConditions string
	// Grouping folds sibling TerraformMachines in the same state into one row.
	Grouping bool
	Now      time.Time
}

func (t TreeOptions) showsConditions(kind string) bool {
	return strings.EqualFold(t.ShowConditions, "all") || (t.ShowConditions != "" && objects.ParseKind(t.ShowConditions) == kind) ||
		strings.EqualFold(t.ShowConditions, kind)
}

// ValidShowConditions reports whether s is a --show-conditions value: all, Cluster, or a CAPTF
// kind in any of its spellings.
func ValidShowConditions(s string) bool {
	return strings.EqualFold(s, "all") || strings.EqualFold(s, "Cluster") || objects.ParseKind(s) != ""
}

// Render writes the tree of every cluster.
func Render(w io.Writer, st *cmdutil.Styles, s Status, opts TreeOptions) {
	var rows []row
	for i, c := range s.Clusters {
		if i > 0 {
			rows = append(rows, row{})
		}
		rows = append(rows, clusterRows(c, opts)...)
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "No CAPTF objects found.")
		return
	}
	header := row{name: "NAME", ready: "STATUS", reason: "REASON", job: "JOB", lastRun: "LAST RUN", serial: "SERIAL", plan: "PENDING PLAN", backups: "BACKUPS", since: "SINCE", message: "MESSAGE"}
	all := append([]row{header}, rows...)
	width := func(f func(r row) string) int {
		n := 0
		for _, r := range all {
			if l := len([]rune(f(r))); l > n {
				n = l
			}
		}
		return n
	}
	cols := []func(r row) string{
		func(r row) string { return r.prefix + r.name },
		func(r row) string { return r.ready },
		func(r row) string { return r.reason },
		func(r row) string { return r.job },
		func(r row) string { return r.lastRun },
		func(r row) string { return r.serial },
		func(r row) string { return r.plan },
		func(r row) string { return r.backups },
		func(r row) string { return r.since },
	}
	widths := make([]int, len(cols))
	for i, c := range cols {
		widths[i] = width(c)
	}
	var b strings.Builder
	for ri, r := range all {
		b.Reset()
		if ri > 0 && r.name == "" {
			w.Write([]byte("\n"))
			continue
		}
		for i, c := range cols {
			text := c(r)
			pad := strings.Repeat(" ", widths[i]-len([]rune(text))+2)
			switch {
			case ri == 0:
				text = st.Bold(text)
			case i == 0:
				text = st.Faint(r.prefix) + r.name
			case i == 1:
				text = colourStatus(st, r.ready, r.negative)
			case i == 6 && r.plan != "-" && r.plan != "":
				text = st.Warn(text)
			}
			b.WriteString(text)
			b.WriteString(pad)
		}
		msg := r.message
		if ri == 0 {
			msg = st.Bold(msg)
		}
		b.WriteString(msg)
		w.Write([]byte(strings.TrimRight(b.String(), " ") + "\n"))
	}
}

func colourStatus(st *cmdutil.Styles, s string, negative bool) string {
	good, bad := "True", "False"
	if negative {
		good, bad = bad, good
	}
	switch s {
	case good:
		return st.OK(s)
	case bad:
		return st.Bad(s)
	case "Unknown":
		return st.Warn(s)
	}
	return s
}

// clusterRows are the Cluster's row (its Available condition, as clusterctl describe shows a
// Cluster), its conditions when asked for, and its objects.
func clusterRows(c Cluster, opts TreeOptions) []row {
	root := row{name: "Cluster/" + c.Name, ready: "-", reason: "-", since: "-"}
	switch {
	case !c.Found:
		root.message = "(no CAPI Cluster of this name)"
	case c.Available == nil:
		root.message = "(no Available condition reported yet)"
	default:
		root.ready, root.reason = string(c.Available.Status), orDash(c.Available.Reason)
		root.since, root.message = since(&c.Available.LastTransitionTime, opts.Now), oneLine(c.Available.Message)
	}
	rows := []row{root}
	if c.Found && opts.showsConditions("Cluster") {
		cont := "  "
		if len(c.Objects) > 0 {
			cont = "│ "
		}
		rows = append(rows, conditionRows(cont, c.Conditions, opts.Now)...)
	}
	items := groupObjects(c.Objects, opts)
	for i, it := range items {
		last := i == len(items)-1
		branch, cont := "├─", "│ "
		if last {
			branch, cont = "└─", "  "
		}
		r := objectRow(it, opts)
		r.prefix = branch
		rows = append(rows, r)
		if len(it.members) == 1 && opts.showsConditions(it.members[0].Kind) {
			rows = append(rows, conditionRows(cont, it.members[0].Conditions, opts.Now)...)
		}
	}
	return rows
}

// conditionRows are one child row per condition, sorted by type, under prefix.
func conditionRows(prefix string, conditions []metav1.Condition, now time.Time) []row {
	conds := append([]metav1.Condition(nil), conditions...)
	sort.SliceStable(conds, func(i, j int) bool { return conds[i].Type < conds[j].Type })
	rows := make([]row, 0, len(conds))
	for j, cond := range conds {
		b := "├─"
		if j == len(conds)-1 {
			b = "└─"
		}
		rows = append(rows, row{prefix: prefix + b, name: cond.Type, ready: string(cond.Status), reason: cond.Reason,
			since: since(&cond.LastTransitionTime, now), message: oneLine(cond.Message), negative: negative[cond.Type]})
	}
	return rows
}

type item struct {
	members []Object
}

// groupObjects keeps clusters and pools one per row and folds TerraformMachines whose row
// would read the same (ready, reason, job, last run, plan) into one.
func groupObjects(objs []Object, opts TreeOptions) []item {
	var out []item
	index := map[string]int{}
	for _, o := range objs {
		if !opts.Grouping || o.Kind != captfv1.KindMachine || opts.showsConditions(o.Kind) || o.PendingPlan != "" || o.ActiveJob != nil {
			out = append(out, item{members: []Object{o}})
			continue
		}
		key := strings.Join([]string{o.Ready, o.Reason, lastRun(o.LastRun), fmt.Sprint(o.Paused, o.Deleting)}, "\x00")
		if i, ok := index[key]; ok {
			out[i].members = append(out[i].members, o)
			continue
		}
		index[key] = len(out)
		out = append(out, item{members: []Object{o}})
	}
	return out
}

func objectRow(it item, opts TreeOptions) row {
	o := it.members[0]
	r := row{name: o.Kind + "/" + o.Name, ready: o.Ready, reason: orDash(o.Reason), job: "-", lastRun: orDash(lastRun(o.LastRun)),
		serial: "-", plan: orDash(o.PendingPlan), backups: fmt.Sprint(o.Backups), since: since(o.Since, opts.Now), message: oneLine(o.Message)}
	if len(it.members) > 1 {
		names := make([]string, len(it.members))
		for i, m := range it.members {
			names[i] = m.Name
		}
		r.name = fmt.Sprintf("%d TerraformMachines", len(it.members))
		r.serial = "-"
		r.backups = "-"
		r.message = "(" + abbreviate(names) + ")"
		return r
	}
	if o.ActiveJob != nil {
		r.job = string(o.ActiveJob.Operation) + " " + o.ActiveJob.Name
	}
	if o.StateSerial != nil {
		r.serial = fmt.Sprint(*o.StateSerial)
	}
	switch {
	case o.Deleting:
		r.message = prefixMsg("deleting", r.message)
	case o.Paused:
		r.message = prefixMsg("paused", r.message)
	}
	return r
}

func prefixMsg(p, m string) string {
	if m == "" {
		return "(" + p + ")"
	}
	return "(" + p + ") " + m
}

func lastRun(r *captfv1.RunSummary) string {
	if r == nil {
		return ""
	}
	s := string(r.Operation) + " " + string(r.Result)
	if c := r.Changes; c != nil {
		s += fmt.Sprintf(" +%d ~%d -%d", c.Add, c.Change, c.Destroy)
	}
	return s
}

func since(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine cuts a message to one line of at most 100 characters, as clusterctl describe wraps.
func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " ..."
	}
	if r := []rune(s); len(r) > 100 {
		s = string(r[:97]) + "..."
	}
	return s
}

func abbreviate(names []string) string {
	const max = 4
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}
