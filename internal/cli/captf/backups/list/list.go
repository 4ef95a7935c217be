// Package list is `kubectl captf backups list OBJECT`: the state backups of one object with
// serial, lineage, size, time and completeness, against the current state.
package list

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/offsite"
	"github.com/capx-io/capx/internal/captf/state"
	"github.com/capx-io/capx/internal/cli/captf/backups/offsiteflags"
	"github.com/capx-io/capx/internal/cli/captf/objects"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// Options are the command's inputs.
type Options struct {
	cmdutil.Deps
	Styles *cmdutil.Styles
	Now    func() time.Time

	Arg     string
	Output  cmdutil.Format
	Offsite bool
	Flags   offsiteflags.Flags
}

// NewCmd returns the command; runF replaces run in tests.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Deps: f.Deps(), Now: time.Now}
	cmd := &cobra.Command{
		Use:   "list OBJECT",
		Short: "List an object's state backups: serial, lineage, size, time, completeness",
		Long: `List the state backups of a TerraformCluster, TerraformMachinePool or TerraformMachine (NAME or
KIND/NAME), newest first, next to the current state: a backup can be restored only when it is
complete and of the current state's lineage. The OFFSITE column is where the manager copied
a backup off the cluster (--offsite-backup-url). --offsite also lists the copies in the
offsite bucket itself, which outlive the namespace: restore one with backups restore --from.
The bucket's credential comes from --offsite-credentials-secret or $AWS_ACCESS_KEY_ID and
$AWS_SECRET_ACCESS_KEY.`,
		Example: fmt.Sprintf(`  %[1]s backups list my-cluster -n team-a
  %[1]s backups list tfm/worker-0 -o json | jq '.backups[] | select(.restorable) | .serial'
  %[1]s backups list my-cluster -n team-a --offsite \
      --offsite-url https://objects.example.com/captf-backups/mgmt-1 --offsite-credentials-secret capx-system/captf-offsite-backup`, f.Name),
		Args:              cmdutil.ExactArgs(1),
		ValidArgsFunction: cmdutil.CompleteNames(f, 1, objects.Lists()...),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Arg = args[0]
			opts.Styles = f.Styles()
			if runF != nil {
				return runF(opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	cmdutil.AddOutputFlag(cmd, &opts.Output)
	cmd.Flags().BoolVar(&opts.Offsite, "offsite", false, "Also list the object's copies in the offsite bucket.")
	opts.Flags.Add(cmd.Flags())
	return cmd
}

// List is the printed shape (kind BackupList).
type List struct {
	cmdutil.TypeMeta `json:",inline"`
	Object           string `json:"object"`
	Namespace        string `json:"namespace"`
	Suffix           string `json:"stateSuffix"`
	// Current is the state now, nil when there is none or it cannot be read (CurrentProblem).
	Current        *Current `json:"current,omitempty"`
	CurrentProblem string   `json:"currentProblem,omitempty"`
	Backups        []Backup `json:"backups"`
	// Offsite lists the copies in the offsite bucket (with --offsite), newest serial first.
	Offsite []OffsiteCopy `json:"offsite,omitempty"`
	// OffsiteTarget is the bucket listed.
	OffsiteTarget string `json:"offsiteTarget,omitempty"`
}

// OffsiteCopy is one copy in the offsite bucket.
type OffsiteCopy struct {
	Serial    int64     `json:"serial"`
	Lineage   string    `json:"lineage"`
	Location  string    `json:"location"`
	Bytes     int64     `json:"bytes"`
	Resources int       `json:"resources"`
	TakenAt   time.Time `json:"takenAt"`
	// Restorable: of the current state's lineage (or there is no readable state).
	Restorable bool `json:"restorable"`
}

// Current is the current state.
type Current struct {
	Serial    int64  `json:"serial"`
	Lineage   string `json:"lineage"`
	Resources int    `json:"resources"`
	Bytes     int64  `json:"bytes"`
}

// Backup is one backup set.
type Backup struct {
	Serial    int64     `json:"serial"`
	Lineage   string    `json:"lineage"`
	Secret    string    `json:"secret"`
	Chunks    int       `json:"chunks"`
	Bytes     int64     `json:"bytes"`
	Resources int       `json:"resources"`
	TakenAt   time.Time `json:"takenAt"`
	SourceJob string    `json:"sourceJob,omitempty"`
	Complete  bool      `json:"complete"`
	// Offsite is where the manager copied the backup off the cluster, "" if it has not.
	Offsite string `json:"offsite,omitempty"`
	// Restorable: complete, and of the current state's lineage (or there is no readable state).
	Restorable bool `json:"restorable"`
}

// Load reads the object's backups and its current state.
func Load(ctx context.Context, c client.Reader, o *objects.Object) (List, error) {
	suffix := o.Owner().StateSuffix()
	l := List{TypeMeta: cmdutil.Meta("BackupList"), Object: o.Ref(), Namespace: o.Namespace(), Suffix: suffix, Backups: []Backup{}}
	snap, err := state.Read(ctx, c, o.Namespace(), suffix)
	switch {
	case err == nil:
		l.Current = &Current{Serial: snap.Serial, Lineage: snap.Lineage, Resources: snap.Resources, Bytes: snap.Bytes}
	case errors.Is(err, state.ErrNotFound):
		l.CurrentProblem = "no state"
	default:
		l.CurrentProblem = err.Error()
	}
	sets, err := state.Backups(ctx, c, o.Namespace(), suffix)
	if err != nil {
		return l, err
	}
	for _, s := range sets {
		b := Backup{Serial: s.Serial, Lineage: s.Lineage, Secret: s.Name, Chunks: len(s.Chunks), Bytes: s.Bytes, Resources: s.Resources,
			TakenAt: s.TakenAt, SourceJob: s.SourceJob, Complete: s.Complete, Offsite: s.Offsite()}
		b.Restorable = s.Complete && (l.Current == nil || l.Current.Lineage == s.Lineage)
		l.Backups = append(l.Backups, b)
	}
	return l, nil
}

// LoadOffsite adds the object's copies in store to l.
func LoadOffsite(ctx context.Context, store *offsite.Store, o *objects.Object, l *List) error {
	copies, _, err := store.List(ctx, offsiteflags.Object(o))
	if err != nil {
		return err
	}
	l.OffsiteTarget = store.Target().String()
	l.Offsite = []OffsiteCopy{}
	for _, c := range copies {
		l.Offsite = append(l.Offsite, OffsiteCopy{Serial: c.Serial, Lineage: c.Lineage, Location: c.Location, Bytes: c.Bytes, Resources: c.Resources,
			TakenAt: c.TakenAt, Restorable: l.Current == nil || l.Current.Lineage == c.Lineage})
	}
	return nil
}

func run(ctx context.Context, opts *Options) error {
	c, ns, err := opts.Connect()
	if err != nil {
		return err
	}
	o, err := objects.Get(ctx, c, ns, opts.Arg)
	if err != nil {
		return err
	}
	l, err := Load(ctx, c, o)
	if err != nil {
		return err
	}
	if opts.Offsite {
		store, err := opts.Flags.Store(ctx, c)
		if err != nil {
			return err
		}
		if err := LoadOffsite(ctx, store, o, &l); err != nil {
			return err
		}
	}
	return cmdutil.Print(opts.IO.Out, opts.Output, l, func() error { return render(opts, l) })
}

func render(opts *Options, l List) error {
	w, st := opts.IO.Out, opts.Styles
	if l.Current != nil {
		fmt.Fprintf(w, "%s state: serial %d, lineage %s, %d resources, %s\n", l.Object, l.Current.Serial, l.Current.Lineage, l.Current.Resources, size(l.Current.Bytes))
	} else {
		fmt.Fprintf(w, "%s state: %s\n", l.Object, st.Warn(l.CurrentProblem))
	}
	if len(l.Backups) == 0 {
		fmt.Fprintln(w, "No backups.")
		return renderOffsite(opts, l)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERIAL\tLINEAGE\tRESOURCES\tSIZE\tTAKEN\tCOMPLETE\tRESTORABLE\tSECRET\tOFFSITE")
	for _, b := range l.Backups {
		restorable := "yes"
		switch {
		case !b.Complete:
			restorable = "no (incomplete)"
		case !b.Restorable:
			restorable = "no (other lineage)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s ago\t%v\t%s\t%s\t%s\n", b.Serial, b.Lineage, b.Resources, size(b.Bytes),
			duration.HumanDuration(opts.Now().Sub(b.TakenAt)), b.Complete, restorable, b.Secret, orNone(b.Offsite))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nRestore one with: %s backups restore %s -n %s --serial N\n", opts.Name, l.Object, l.Namespace)
	return renderOffsite(opts, l)
}

func renderOffsite(opts *Options, l List) error {
	w := opts.IO.Out
	if l.Offsite == nil {
		return nil
	}
	fmt.Fprintf(w, "\nOffsite copies in %s:\n", l.OffsiteTarget)
	if len(l.Offsite) == 0 {
		_, err := fmt.Fprintln(w, "None.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERIAL\tLINEAGE\tRESOURCES\tSIZE\tTAKEN\tRESTORABLE\tLOCATION")
	for _, c := range l.Offsite {
		restorable := "yes"
		if !c.Restorable {
			restorable = "no (other lineage)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s ago\t%s\t%s\n", c.Serial, c.Lineage, c.Resources, size(c.Bytes),
			duration.HumanDuration(opts.Now().Sub(c.TakenAt)), restorable, c.Location)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nRestore one with: %s backups restore %s -n %s --from offsite --serial N\n", opts.Name, l.Object, l.Namespace)
	return err
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
