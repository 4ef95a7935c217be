package list

import (
	"strings"
	"testing"
	"time"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// The command the list suggests looks where the list did.
func TestRenderSuggestsTheNamespace(t *testing.T) {
	for _, tc := range []struct {
		all  bool
		want string
	}{
		{false, "Review one with: kubectl captf plan show NAME -n team-a\n"},
		{true, "Review one with: kubectl captf plan show NAME -n NAMESPACE\n"},
	} {
		streams, _, out, _ := cmdutil.TestIOStreams(false)
		now := time.Now()
		opts := &Options{Deps: cmdutil.Deps{IO: streams, Name: "kubectl captf"}, Styles: cmdutil.NewStyles(out, false),
			Now: func() time.Time { return now }, AllNamespaces: tc.all, namespace: "team-a"}
		l := List{Items: []Item{{Name: "web-1", Namespace: "team-a", Target: captfv1.PlanTarget{Kind: "TerraformCluster", Name: "web"},
			Phase: captfv1.PlanPending, Created: now}}}
		if err := render(opts, l); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(out.String(), tc.want) {
			t.Errorf("-A=%v:\n%s", tc.all, out)
		}
	}
}
