package restore

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/offsite"
	"github.com/capx-io/capx/internal/captf/state"
	"github.com/capx-io/capx/internal/cli/captf/backups/list"
	"github.com/capx-io/capx/internal/cli/captf/objects"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/testenv"
)

func TestFromFlags(t *testing.T) {
	var got *Options
	exec := func(args ...string) (cmdutil.ExitCode, string) {
		streams, _, _, errOut := cmdutil.TestIOStreams(false)
		f := cmdutil.NewTestFactory(streams, "kubectl captf", nil, nil, nil, "ns")
		root := cmdutil.NewRoot(f, "", "")
		root.AddCommand(NewCmd(f, func(o *Options) error { got = o; return nil }))
		return cmdutil.Execute(root, streams, append([]string{"restore", "web"}, args...)), errOut.String()
	}
	if code, errOut := exec("--from", "offsite"); code != cmdutil.ExitUsage || !strings.Contains(errOut, "--serial is required") {
		t.Fatalf("--from offsite without --serial: exit %d: %s", code, errOut)
	}
	if code, errOut := exec("--from", "gs://b/k", "--serial", "1"); code != cmdutil.ExitUsage || !strings.Contains(errOut, "want offsite") {
		t.Fatalf("--from gs://: exit %d: %s", code, errOut)
	}
	if code, errOut := exec("--from", "s3://b/k", "--offsite-url", "https://o.example.com/b", "--offsite-credentials-secret", "capx-system/creds"); code != cmdutil.ExitOK {
		t.Fatalf("--from s3:// needs no --serial: exit %d: %s", code, errOut)
	}
	if got.From != "s3://b/k" || got.Serial != -1 || got.Flags.URL != "https://o.example.com/b" || got.Flags.CredentialsSecret != "capx-system/creds" {
		t.Fatalf("%+v", got)
	}
}

func TestOffsiteChecks(t *testing.T) {
	o := objects.Wrap(testenv.TerraformCluster("ns", "web", "web", "img"))
	digest := strings.Repeat("ab", 32)
	src := &offsiteSource{copy: offsite.Copy{Serial: 7, Lineage: "L1", Digest: digest, Location: "s3://b/k", Bytes: 10},
		snap: &state.Snapshot{Serial: 7, Lineage: "L1"}}
	names := func(cs []Check) (failed []string) {
		for _, c := range cs {
			if !c.Passed {
				failed = append(failed, c.Name)
			}
		}
		return failed
	}
	lost := list.List{CurrentProblem: "no state"}
	if cs := offsiteChecks(lost, o, state.Lock{}, nil, src); len(names(cs)) != 0 || cs[0].Name != "offsite copy intact" {
		t.Fatalf("a lost state takes the copy: %+v", cs)
	}
	// Another history than the current state's is refused, as in the cluster.
	other := list.List{Current: &list.Current{Serial: 1, Lineage: "L9"}}
	if cs := offsiteChecks(other, o, state.Lock{}, nil, src); strings.Join(names(cs), ",") != "same lineage" {
		t.Fatalf("other lineage: %+v", cs)
	}
	// Bytes that decode to another serial than recorded, or not at all.
	bad := *src
	bad.snap = &state.Snapshot{Serial: 8, Lineage: "L1"}
	if cs := offsiteChecks(lost, o, state.Lock{}, nil, &bad); strings.Join(names(cs), ",") != "offsite copy intact" {
		t.Fatalf("another serial: %+v", cs)
	}
	bad.snap, bad.decodeErr = nil, errors.New("not gzip")
	if cs := offsiteChecks(lost, o, state.Lock{}, nil, &bad); strings.Join(names(cs), ",") != "offsite copy intact" {
		t.Fatalf("undecodable: %+v", cs)
	}
	// A paused object passes: the restore is requested and runs once unpaused.
	o.Conditions = append(o.Conditions, metav1.Condition{Type: "Paused", Status: metav1.ConditionTrue})
	if cs := offsiteChecks(lost, o, state.Lock{}, nil, src); len(names(cs)) != 0 {
		t.Fatalf("paused: %+v", cs)
	}
	o.Status.ActiveJob = &captfv1.JobReference{Name: "j", Operation: captfv1.OperationApply}
	if cs := offsiteChecks(lost, o, state.Lock{}, nil, src); strings.Join(names(cs), ",") != "no Job running" {
		t.Fatalf("running: %+v", cs)
	}
}
