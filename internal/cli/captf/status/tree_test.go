package status

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/testenv/golden"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-d)); return &t }

func cond(typ string, status metav1.ConditionStatus, reason, msg string, age time.Duration) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: *ago(age)}
}

func machine(name string, ready metav1.ConditionStatus, reason string) Object {
	return Object{Kind: "TerraformMachine", Name: name, Ready: string(ready), Reason: reason, Since: ago(3 * time.Hour), Backups: 2,
		StateSerial: ptr.To[int64](4),
		LastRun:     &captfv1.RunSummary{Operation: captfv1.OperationApply, Result: captfv1.RunSucceeded, Changes: &captfv1.ChangeCounts{Add: 3}},
		Conditions:  []metav1.Condition{cond("Ready", ready, reason, "", 3*time.Hour)}}
}

func testStatus() Status {
	return Status{TypeMeta: cmdutil.Meta("ClusterStatus"), Clusters: []Cluster{{
		Namespace: "team-a", Name: "web", Found: true, Ready: "False", Reason: "WaitingForControlPlane",
		Available: ptr.To(cond("Available", metav1.ConditionFalse, "NotAvailable", "* WorkersAvailable: 1 of 2 MachineDeployments available\n* RemoteConnectionProbe: no connection", 5*time.Minute)),
		Conditions: []metav1.Condition{
			cond("Available", metav1.ConditionFalse, "NotAvailable", "* WorkersAvailable: 1 of 2 MachineDeployments available\n* RemoteConnectionProbe: no connection", 5*time.Minute),
			cond("InfrastructureReady", metav1.ConditionTrue, "Ready", "", time.Hour),
			cond("Paused", metav1.ConditionFalse, "NotPaused", "", time.Hour),
		},
		Objects: []Object{
			{Kind: "TerraformCluster", Name: "web", Ready: "False", Reason: "PlanAwaitingApproval", Since: ago(10 * time.Minute),
				Message: "TerraformPlan web-0123456789 waits for approval", StateSerial: ptr.To[int64](7), PendingPlan: "web-0123456789", Backups: 5,
				LastRun: &captfv1.RunSummary{Operation: captfv1.OperationApply, Result: captfv1.RunBlocked},
				Conditions: []metav1.Condition{
					cond("Ready", metav1.ConditionFalse, "PlanAwaitingApproval", "TerraformPlan web-0123456789 waits for approval", 10*time.Minute),
					cond("DriftDetected", metav1.ConditionFalse, "NoDrift", "", time.Hour),
					cond("StateReadable", metav1.ConditionTrue, "StateRead", "", 2*time.Hour),
				}},
			{Kind: "TerraformMachinePool", Name: "workers", Ready: "True", Reason: "Ready", Since: ago(2 * time.Hour), Backups: 3,
				StateSerial: ptr.To[int64](12),
				ActiveJob:   &captfv1.JobReference{Name: "captf-mp-workers-apply-a1-4f2a9c", Operation: captfv1.OperationApply}},
			machine("web-cp-0", metav1.ConditionTrue, "Ready"),
			machine("web-cp-1", metav1.ConditionTrue, "Ready"),
			machine("web-cp-2", metav1.ConditionTrue, "Ready"),
			machine("web-md-0", metav1.ConditionFalse, "ApplyFailed"),
		},
	}}}
}

func TestTreeGolden(t *testing.T) {
	for _, tc := range []struct {
		golden string
		opts   TreeOptions
		colour bool
	}{
		{"tree.golden", TreeOptions{Grouping: true, Now: now}, false},
		{"tree-ungrouped.golden", TreeOptions{Grouping: false, Now: now}, false},
		{"tree-conditions.golden", TreeOptions{Grouping: true, ShowConditions: "tfc", Now: now}, false},
		{"tree-colour.golden", TreeOptions{Grouping: true, ShowConditions: "all", Now: now}, true},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			var b bytes.Buffer
			Render(&b, cmdutil.NewStyles(&b, tc.colour), testStatus(), tc.opts)
			if !tc.colour && bytes.Contains(b.Bytes(), []byte("\x1b[")) {
				t.Fatal("escape codes with colour off")
			}
			golden.Assert(t, filepath.Join("testdata", tc.golden), b.Bytes())
		})
	}
}

func TestNegativePolarity(t *testing.T) {
	var b bytes.Buffer
	st := cmdutil.NewStyles(&b, true)
	if colourStatus(st, "False", true) != st.OK("False") || colourStatus(st, "True", true) != st.Bad("True") {
		t.Fatal("a negative condition False is good")
	}
	if colourStatus(st, "True", false) != st.OK("True") || colourStatus(st, "Unknown", false) != st.Warn("Unknown") {
		t.Fatal("positive polarity")
	}
}

func TestEmpty(t *testing.T) {
	var b bytes.Buffer
	Render(&b, cmdutil.NewStyles(&b, false), Status{}, TreeOptions{})
	if b.String() != "No CAPTF objects found.\n" {
		t.Fatal(b.String())
	}
}
