// Package restore is `kubectl captf backups restore OBJECT --serial N`: check that a backup
// can be restored (complete, same lineage, no lock, no Job), confirm, request the restore and
// optionally follow it.
package restore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/state"
	"github.com/capx-io/capx/internal/cli/captf/backups/list"
	"github.com/capx-io/capx/internal/cli/captf/backups/offsiteflags"
	"github.com/capx-io/capx/internal/cli/captf/objects"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// Options are the command's inputs.
type Options struct {
	cmdutil.Deps
	Styles *cmdutil.Styles

	Arg      string
	Serial   int64
	Yes      bool
	DryRun   bool
	Wait     bool
	Timeout  time.Duration
	Interval time.Duration
	Output   cmdutil.Format
	// From is "" (an in-cluster backup), "offsite" (the offsite copy of --serial) or
	// s3://bucket/key (that copy).
	From  string
	Flags offsiteflags.Flags
}

// NewCmd returns the command; runF replaces run in tests.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Deps: f.Deps(), Serial: -1, Interval: 2 * time.Second}
	cmd := &cobra.Command{
		Use:   "restore OBJECT (--serial N | --from offsite --serial N | --from s3://BUCKET/KEY)",
		Short: "Restore an object's state from one of its backups, in the cluster or offsite",
		Long: `Restore the state of a TerraformCluster, TerraformMachinePool or TerraformMachine from its backup
of serial N. The restore is requested only after checking that the backup is complete and of the
current state's lineage, that no one holds the state lock and that no Job runs for the object;
the manager then runs a restore Job (state push of the backup, then state list). On a terminal
you confirm; elsewhere pass --yes. --dry-run runs the checks and changes nothing. --wait
follows the restore until RestoreJobSucceeded says how it ended.

--from restores from the offsite bucket the manager copies backups to (--offsite-backup-url):
"offsite" takes the copy of --serial, s3://BUCKET/KEY names one (backups list --offsite lists
them). The copy must be the object's own (same namespace, kind and name, as after the namespace
was deleted and the object re-created from git), intact (SHA-256 as recorded) and decode to the
serial and lineage it records; it is then written into the namespace as a backup of the object
and restored through the same checks and restore Job. The bucket's credential comes from
--offsite-credentials-secret NAMESPACE/NAME (read with your own rights) or $AWS_ACCESS_KEY_ID and
$AWS_SECRET_ACCESS_KEY. Create a re-created object paused, so that nothing applies before the
restore: the backup is written and the restore requested while it is paused, and runs once it
is unpaused.

After a restore, a cluster or pool whose current inputs differ from the backup's re-applies
(guarded as always); run a drift check before relying on it.

Exit codes: 0 requested (or restored, with --wait), 1 a check failed (nothing requested),
2 an error or a failed restore, 3 bad usage or --yes missing without a terminal, 4 declined.`,
		Example: fmt.Sprintf(`  %[1]s backups list my-cluster -n team-a
  %[1]s backups restore my-cluster -n team-a --serial 7 --dry-run
  %[1]s backups restore my-cluster -n team-a --serial 7 --yes --wait
  # The namespace was deleted and the objects re-created (paused) from git:
  export AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=...
  %[1]s backups list my-cluster -n team-a --offsite --offsite-url https://objects.example.com/captf-backups/mgmt-1
  %[1]s backups restore my-cluster -n team-a --from offsite --serial 7 --offsite-url https://objects.example.com/captf-backups/mgmt-1 --yes
  %[1]s backups restore my-cluster -n team-a --from s3://captf-backups/mgmt-1/team-a/TerraformCluster/my-cluster/7-<sha256>.tfstate.gz \
      --offsite-url https://objects.example.com/captf-backups/mgmt-1 --offsite-credentials-secret capx-system/captf-offsite-backup --yes`, f.Name),
		Args:              cmdutil.ExactArgs(1),
		ValidArgsFunction: cmdutil.CompleteNames(f, 1, objects.Lists()...),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Arg = args[0]
			if err := checkFrom(opts.From); err != nil {
				return err
			}
			if opts.Serial < 0 && !strings.HasPrefix(opts.From, "s3://") {
				return cmdutil.Usagef("--serial is required: the backup serial to restore (see %s backups list %s%s)", f.Name, args[0], namespaceFlag(opts.Namespace))
			}
			opts.Styles = f.Styles()
			if runF != nil {
				return runF(opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	cmd.Flags().Int64Var(&opts.Serial, "serial", -1, "Serial of the backup to restore (required).")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "Restore without asking.")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "Run the checks; request nothing.")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "Wait until the restore finished.")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 15*time.Minute, "How long --wait waits.")
	cmd.Flags().StringVar(&opts.From, "from", "", "Restore from the offsite bucket: offsite (the copy of --serial) or s3://BUCKET/KEY.")
	opts.Flags.Add(cmd.Flags())
	cmdutil.AddOutputFlag(cmd, &opts.Output)
	return cmd
}

// namespaceFlag is " -n <namespace>" for a suggested command, so that it looks where this one
// did; "" when the namespace cannot be read (the kubeconfig is the next command's problem).
func namespaceFlag(namespace func() (string, error)) string {
	ns, err := namespace()
	if err != nil || ns == "" {
		return ""
	}
	return " -n " + ns
}

// Check is one precondition.
type Check struct {
	Name    string `json:"name"`
	Passed  bool   `json:"passed"`
	Message string `json:"message"`
}

// Result is the printed shape (kind Restore).
type Result struct {
	cmdutil.TypeMeta `json:",inline"`
	Object           string `json:"object"`
	Namespace        string `json:"namespace"`
	Serial           int64  `json:"serial"`
	Backup           string `json:"backup,omitempty"`
	// From is the offsite copy restored (s3://bucket/key), with --from.
	From      string  `json:"from,omitempty"`
	DryRun    bool    `json:"dryRun"`
	Checks    []Check `json:"checks"`
	Requested bool    `json:"requested"`
	// Outcome with --wait: Restored or Failed.
	Outcome string `json:"outcome,omitempty"`
	Message string `json:"message,omitempty"`
}

// Checks judges whether the backup of serial can be restored now.
func Checks(l list.List, o *objects.Object, lock state.Lock, lockErr error, serial int64) (checks []Check, backup string) {
	var b *list.Backup
	for i := range l.Backups {
		if l.Backups[i].Serial == serial && l.Backups[i].Complete && (b == nil || l.Backups[i].Restorable && !b.Restorable) {
			b = &l.Backups[i]
		}
	}
	switch {
	case b == nil:
		checks = append(checks, Check{"backup complete", false, fmt.Sprintf("no complete backup of serial %d", serial)})
	default:
		backup = b.Secret
		checks = append(checks, Check{"backup complete", true, fmt.Sprintf("%s: %d chunk(s), %d resources", b.Secret, b.Chunks, b.Resources)})
		switch {
		case l.Current == nil:
			checks = append(checks, Check{"same lineage", true, "no readable current state (" + l.CurrentProblem + "); the backup's lineage " + b.Lineage + " is restored"})
		case l.Current.Lineage != b.Lineage:
			checks = append(checks, Check{"same lineage", false, fmt.Sprintf("the backup is of lineage %s, the current state of %s: it is another state's history", b.Lineage, l.Current.Lineage)})
		default:
			checks = append(checks, Check{"same lineage", true, fmt.Sprintf("lineage %s; the contents of serial %d replace the current serial %d, under a new serial above %d",
				b.Lineage, serial, l.Current.Serial, max(l.Current.Serial, serial-1))})
		}
	}
	switch {
	case lockErr != nil:
		checks = append(checks, Check{"state not locked", false, "read the state lock: " + lockErr.Error()})
	case lock.Locked():
		who := lock.Holder
		if lock.Info != nil {
			who = fmt.Sprintf("%s (%s since %s)", lock.Info.Who, lock.Info.Operation, lock.Info.Created.Format(time.RFC3339))
		}
		checks = append(checks, Check{"state not locked", false, "Lease " + lock.Lease + " is held by " + who})
	default:
		checks = append(checks, Check{"state not locked", true, "no lock held"})
	}
	if j := o.Status.ActiveJob; j != nil {
		checks = append(checks, Check{"no Job running", false, fmt.Sprintf("%s Job %s is running; wait for it", j.Operation, j.Name)})
	} else {
		checks = append(checks, Check{"no Job running", true, "no active Job"})
	}
	if c := objects.Condition(o.Conditions, "Paused"); c != nil && c.Status == metav1.ConditionTrue {
		checks = append(checks, Check{"not paused", false, "the object is paused; the manager would not run the restore until it is unpaused"})
	}
	return checks, backup
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
	l, err := list.Load(ctx, c, o)
	if err != nil {
		return err
	}
	lock, lockErr := state.ReadLock(ctx, c, ns, l.Suffix)
	res := Result{TypeMeta: cmdutil.Meta("Restore"), Object: o.Ref(), Namespace: ns, Serial: opts.Serial, DryRun: opts.DryRun}
	var importCopy func() (string, error)
	if opts.From == "" {
		res.Checks, res.Backup = Checks(l, o, lock, lockErr, opts.Serial)
	} else {
		src, err := fetchOffsite(ctx, c, opts, o, l)
		if err != nil {
			return err
		}
		opts.Serial = src.copy.Serial
		res.Serial, res.From = src.copy.Serial, src.copy.Location
		res.Checks = offsiteChecks(l, o, lock, lockErr, src)
		importCopy = func() (string, error) { return src.write(ctx, c, opts.Clock.Now()) }
	}
	checks := res.Checks
	failed := false
	for _, ch := range checks {
		failed = failed || !ch.Passed
	}
	out := func() error {
		return cmdutil.Print(opts.IO.Out, opts.Output, res, func() error { return render(opts, res) })
	}
	if failed || opts.DryRun {
		if err := out(); err != nil {
			return err
		}
		if failed {
			return cmdutil.ErrFound
		}
		return nil
	}
	if opts.Output == cmdutil.Text {
		_ = render(opts, res)
		fmt.Fprintln(opts.IO.Out)
	}
	if err := cmdutil.Confirm(opts.IO, opts.Yes, fmt.Sprintf("Restore the state of %s to serial %d?", o.Ref(), opts.Serial)); err != nil {
		return err
	}
	if importCopy != nil {
		name, err := importCopy()
		if err != nil {
			return err
		}
		res.Backup = name
		fmt.Fprintf(opts.IO.ErrOut, "Wrote the offsite copy %s into the backup %s.\n", res.From, name)
	}
	if err := request(ctx, c, o, opts.Serial); err != nil {
		return err
	}
	res.Requested = true
	fmt.Fprintf(opts.IO.ErrOut, "Requested the restore of serial %d (annotation %s).\n", opts.Serial, captfv1.RestoreStateAnnotation)
	var werr error
	if opts.Wait {
		res.Outcome, res.Message, werr = waitRestored(ctx, c, opts, o)
	}
	if opts.Output != cmdutil.Text {
		if err := out(); err != nil {
			return err
		}
	} else if res.Outcome != "" {
		fmt.Fprintf(opts.IO.Out, "%s: %s\n", res.Outcome, res.Message)
	}
	return werr
}

func render(opts *Options, res Result) error {
	st := opts.Styles
	for _, ch := range res.Checks {
		mark := st.OK("PASS")
		if !ch.Passed {
			mark = st.Bad("FAIL")
		}
		fmt.Fprintf(opts.IO.Out, "%s  %-18s %s\n", mark, ch.Name, ch.Message)
	}
	switch {
	case !allPassed(res.Checks):
		fmt.Fprintf(opts.IO.Out, "\nNothing was requested. The backups: %s backups list %s -n %s\n", opts.Name, res.Object, res.Namespace)
	case res.DryRun && res.From != "":
		fmt.Fprintf(opts.IO.Out, "\n(dry run) would write %s into a backup of %s and annotate it with %s=%d\n", res.From, res.Object, captfv1.RestoreStateAnnotation, res.Serial)
	case res.DryRun:
		fmt.Fprintf(opts.IO.Out, "\n(dry run) would annotate %s with %s=%d\n", res.Object, captfv1.RestoreStateAnnotation, res.Serial)
	}
	return nil
}

func allPassed(cs []Check) bool {
	for _, c := range cs {
		if !c.Passed {
			return false
		}
	}
	return true
}

// request sets the restore annotation. A restore of the same serial that already ran is
// requested again by removing the annotation first, as the manager does not repeat a restore
// for an unchanged request.
func request(ctx context.Context, c client.Client, o *objects.Object, serial int64) error {
	want := strconv.FormatInt(serial, 10)
	obj := o.Obj
	if obj.GetAnnotations()[captfv1.RestoreStateAnnotation] == want {
		patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
		a := obj.GetAnnotations()
		delete(a, captfv1.RestoreStateAnnotation)
		obj.SetAnnotations(a)
		if err := c.Patch(ctx, obj, patch); err != nil {
			return fmt.Errorf("withdraw the earlier restore request of %s: %w", o.Ref(), err)
		}
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[captfv1.RestoreStateAnnotation] = want
	obj.SetAnnotations(a)
	if err := c.Patch(ctx, obj, patch); err != nil {
		if apierrors.IsForbidden(err) {
			return fmt.Errorf("requesting the restore needs patch on %s: %w", o.Kind, err)
		}
		return fmt.Errorf("request the restore of %s: %w", o.Ref(), err)
	}
	return nil
}

func waitRestored(ctx context.Context, c client.Reader, opts *Options, o *objects.Object) (outcome, message string, err error) {
	// Condition times have the API server's second precision.
	start := opts.Clock.Now().Add(-time.Second)
	f := cmdutil.Follower{ErrOut: opts.IO.ErrOut, Clock: opts.Clock, Interval: opts.Interval, Timeout: opts.Timeout}
	err = f.Follow(ctx, func(ctx context.Context) (string, bool, error) {
		cur, err := objects.Get(ctx, c, o.Namespace(), o.Ref())
		if err != nil {
			return "", false, nil
		}
		progress := "waiting for the manager"
		if j := cur.Status.ActiveJob; j != nil {
			progress = fmt.Sprintf("%s Job %s running", j.Operation, j.Name)
		}
		cond := objects.Condition(cur.Conditions, captfv1.RestoreJobSucceededCondition)
		if cond != nil {
			progress += fmt.Sprintf(", %s=%s (%s)", cond.Type, cond.Status, cond.Reason)
		}
		if cond == nil || cond.LastTransitionTime.Time.Before(start) || cur.Status.ActiveJob != nil {
			return progress, false, nil
		}
		switch {
		case cond.Status == metav1.ConditionTrue && cond.Reason == captfv1.StateRestoredReason &&
			cur.Status.LastRestoredSerial != nil && *cur.Status.LastRestoredSerial == opts.Serial:
			outcome, message = "Restored", cond.Message
			return progress, true, nil
		case cond.Status == metav1.ConditionFalse:
			outcome, message = "Failed", cond.Message
			return progress, false, errors.New("the restore failed: " + cond.Reason + ": " + cond.Message)
		}
		return progress, false, nil
	})
	var ended *cmdutil.WaitEnded
	if errors.As(err, &ended) {
		return "", "", fmt.Errorf("the restore has not finished %s (it goes on); keep watching with: %s status -n %s", ended.Waited, opts.Name, o.Namespace())
	}
	return outcome, message, err
}
