package restore

import (
	"strings"
	"testing"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/state"
	"github.com/capx-io/capx/internal/cli/captf/backups/list"
	"github.com/capx-io/capx/internal/cli/captf/objects"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/testenv"
)

func TestFlags(t *testing.T) {
	streams, _, _, errOut := cmdutil.TestIOStreams(false)
	f := cmdutil.NewTestFactory(streams, "kubectl captf", nil, nil, nil, "ns")
	var got *Options
	root := cmdutil.NewRoot(f, "", "")
	root.AddCommand(NewCmd(f, func(o *Options) error { got = o; return nil }))
	// The command it suggests looks in the same namespace.
	if code := cmdutil.Execute(root, streams, []string{"restore", "web"}); code != cmdutil.ExitUsage ||
		!strings.Contains(errOut.String(), "--serial is required") || !strings.Contains(errOut.String(), "(see kubectl captf backups list web -n ns)") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if code := cmdutil.Execute(root, streams, []string{"restore", "web", "--serial", "0", "--yes", "--dry-run", "--wait"}); code != cmdutil.ExitOK {
		t.Fatalf("exit %d", code)
	}
	if got.Serial != 0 || !got.Yes || !got.DryRun || !got.Wait {
		t.Fatalf("%+v", got)
	}
}

func TestChecks(t *testing.T) {
	o := objects.Wrap(testenv.TerraformCluster("ns", "web", "web", "img"))
	l := list.List{Current: &list.Current{Serial: 9, Lineage: "L1"}, Backups: []list.Backup{
		{Serial: 7, Lineage: "L1", Complete: true, Restorable: true, Secret: "b7"},
		{Serial: 5, Lineage: "L0", Complete: true, Secret: "b5"},
		{Serial: 3, Lineage: "L1", Complete: false, Secret: "b3"},
	}}
	failed := func(cs []Check) []string {
		var out []string
		for _, c := range cs {
			if !c.Passed {
				out = append(out, c.Name)
			}
		}
		return out
	}
	if cs, b := Checks(l, o, state.Lock{}, nil, 7); len(failed(cs)) != 0 || b != "b7" {
		t.Fatalf("serial 7: %+v", cs)
	}
	// The backup's contents come back under a serial past the current one: the restore Job
	// pushes them above it, and OpenTofu numbers the write (one more when the contents differ).
	if cs, _ := Checks(l, o, state.Lock{}, nil, 7); cs[1].Message != "lineage L1; the contents of serial 7 replace the current serial 9, under a new serial above 9" {
		t.Fatalf("same lineage: %q", cs[1].Message)
	}
	if cs, _ := Checks(l, o, state.Lock{}, nil, 5); strings.Join(failed(cs), ",") != "same lineage" {
		t.Fatalf("other lineage: %+v", cs)
	}
	if cs, _ := Checks(l, o, state.Lock{}, nil, 3); strings.Join(failed(cs), ",") != "backup complete" {
		t.Fatalf("incomplete: %+v", cs)
	}
	o.Status.ActiveJob = &captfv1.JobReference{Name: "j", Operation: captfv1.OperationApply}
	if cs, _ := Checks(l, o, state.Lock{Holder: "lock-1", Lease: "lock-tfstate-default-x"}, nil, 7); strings.Join(failed(cs), ",") != "state not locked,no Job running" {
		t.Fatalf("locked and running: %+v", cs)
	}
	l.Current = nil
	l.CurrentProblem = "no state"
	o.Status.ActiveJob = nil
	if cs, _ := Checks(l, o, state.Lock{}, nil, 5); len(failed(cs)) != 0 {
		t.Fatalf("a lost state takes any complete backup: %+v", cs)
	}
}
