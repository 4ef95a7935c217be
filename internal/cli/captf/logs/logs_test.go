package logs

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/cli/captf/objects"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/scheme"
	"github.com/capx-io/capx/internal/testenv"
)

// The client-go fake serves every pod's log as "fake logs"; what is tested here is which Job
// and pod are chosen, and the errors. TestRunbook covers the real manager's Jobs.
func TestLogsPicksTheLatestJob(t *testing.T) {
	tc := testenv.TerraformCluster("ns", "c1", "c1", "img")
	owner := objects.Wrap(tc).Owner()
	job := func(name string, age time.Duration) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: owner.Labels(),
			CreationTimestamp: metav1.NewTime(time.Now().Add(-age))}}
		j.Labels[captfv1.OperationLabel] = "apply"
		j.Labels[captfv1.AttemptLabel] = "1"
		return j
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc, job("old", time.Hour), job("new", time.Minute)).Build()
	pod := func(name, job string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"batch.kubernetes.io/job-name": job}},
			Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	}
	cs := k8sfake.NewClientset(pod("new-pod", "new"), pod("old-pod", "old"))

	for _, tc := range []struct {
		args    []string
		code    cmdutil.ExitCode
		stderr  string
		clients bool
	}{
		{[]string{"logs", "c1"}, cmdutil.ExitOK, "Job new (apply, attempt 1)", true},
		{[]string{"logs", "tfc/c1", "--previous"}, cmdutil.ExitOK, "Job old (apply, attempt 1)", true},
		{[]string{"logs", "nothing"}, cmdutil.ExitFailure, "no TerraformCluster, TerraformMachinePool or TerraformMachine", true},
		{[]string{"logs"}, cmdutil.ExitUsage, "accepts 1 arg", false},
	} {
		streams, _, out, errOut := cmdutil.TestIOStreams(false)
		var cl client.WithWatch = c
		f := cmdutil.NewTestFactory(streams, "kubectl captf", nil, cl, cs, "ns")
		root := cmdutil.NewRoot(f, "", "")
		root.AddCommand(NewCmd(f, nil))
		code := cmdutil.Execute(root, streams, tc.args)
		if code != tc.code || !strings.Contains(errOut.String(), tc.stderr) {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, errOut)
		}
		if tc.code == cmdutil.ExitOK && out.String() != "fake logs" {
			t.Errorf("%v: stdout %q", tc.args, out)
		}
	}
}

func TestFlagsReachOptions(t *testing.T) {
	streams, _, _, _ := cmdutil.TestIOStreams(false)
	f := cmdutil.NewTestFactory(streams, "kubectl captf", nil, nil, nil, "ns")
	var got *Options
	cmd := NewCmd(f, func(o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"tfm/w0", "-p", "-f", "-c", "runner"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Arg != "tfm/w0" || !got.Previous || !got.Follow || got.Container != "runner" {
		t.Fatalf("%+v", got)
	}
}
