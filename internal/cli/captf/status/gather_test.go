package status

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/scheme"
	"github.com/capx-io/capx/internal/testenv"
)

// A v1beta2 Cluster reports Available in status.conditions (and Ready only under
// status.deprecated.v1beta1): the Cluster's row shows Available, as clusterctl describe does,
// and the JSON carries it with every v1beta2 condition.
func TestGatherShowsTheClustersAvailable(t *testing.T) {
	cl := testenv.Cluster("team-a", "web", "TerraformCluster", "web")
	cl.Status.Conditions = []metav1.Condition{
		{Type: clusterv1.ClusterAvailableCondition, Status: metav1.ConditionFalse, Reason: "NotAvailable",
			Message: "* RemoteConnectionProbe: no connection", LastTransitionTime: metav1.NewTime(now.Add(-7 * time.Minute))},
		{Type: clusterv1.ClusterInfrastructureReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))},
	}
	cl.Status.Deprecated = &clusterv1.ClusterDeprecatedStatus{V1Beta1: &clusterv1.ClusterV1Beta1DeprecatedStatus{Conditions: clusterv1.Conditions{
		{Type: clusterv1.ReadyV1Beta1Condition, Status: "False", Reason: "WaitingForControlPlane"},
	}}}
	tc := testenv.TerraformCluster("team-a", "web", "web", "img")
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(cl, tc).WithStatusSubresource(cl).Build()

	s, err := Gather(context.Background(), c, "team-a", "web")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	Render(&b, cmdutil.NewStyles(&b, false), s, TreeOptions{Grouping: true, Now: now})
	if !regexp.MustCompile(`(?m)^Cluster/web\s+False\s+NotAvailable\s+.*7m\s+\* RemoteConnectionProbe: no connection$`).Match(b.Bytes()) {
		t.Fatalf("the Cluster's row does not show Available:\n%s", b.String())
	}
	b.Reset()
	Render(&b, cmdutil.NewStyles(&b, false), s, TreeOptions{Grouping: true, Now: now, ShowConditions: "Cluster"})
	if !regexp.MustCompile(`(?m)^│ ├─Available\s+False\s+NotAvailable`).Match(b.Bytes()) ||
		!regexp.MustCompile(`(?m)^│ └─InfrastructureReady\s+True\s+Ready`).Match(b.Bytes()) {
		t.Fatalf("--show-conditions Cluster does not list the Cluster's conditions:\n%s", b.String())
	}

	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Clusters []struct {
			Ready      string `json:"ready"`
			Reason     string `json:"reason"`
			Available  *metav1.Condition
			Conditions []metav1.Condition
		}
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	got := out.Clusters[0]
	if got.Available == nil || got.Available.Reason != "NotAvailable" || len(got.Conditions) != 2 || got.Ready != "False" || got.Reason != "WaitingForControlPlane" {
		t.Fatalf("JSON: %s", raw)
	}
}

func TestValidShowConditions(t *testing.T) {
	for s, want := range map[string]bool{"all": true, "Cluster": true, "cluster": true, "tfm": true, "TerraformMachinePool": true, "Machine": false, "": false} {
		if ValidShowConditions(s) != want {
			t.Errorf("%q: %v", s, !want)
		}
	}
}
