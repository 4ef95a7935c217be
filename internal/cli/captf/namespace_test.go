package captf_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/testenv"
)

// An operator who forgets -n is told where the object is (or how to look everywhere), by every
// command that names one and every list that comes back empty.
func TestForgottenNamespaceIsNamed(t *testing.T) {
	g := NewWithT(t)
	ns := env.NewNamespace(t)
	create(t, testenv.Cluster(ns, "hint", "TerraformCluster", "hint"), testenv.TerraformCluster(ns, "hint", "hint", clusterImage))
	other := env.NewNamespace(t)
	want := "(it is in namespace " + ns + ": add -n " + ns + ")"
	for _, args := range [][]string{
		{"status", "hint"},
		{"backups", "list", "hint"},
		{"backups", "restore", "hint", "--serial", "1", "--dry-run"},
		{"logs", "tfc/hint"},
		{"plan", "show", "hint"},
		{"approve", "hint", "--yes"},
		{"owners", "check", "hint"},
	} {
		r := run(t, other, runOpts{}, args...)
		g.Expect(r.code).To(Equal(cmdutil.ExitFailure), "%v: %s", args, r)
		g.Expect(r.errOut).To(ContainSubstring(want), "%v", args)
	}
	r := run(t, other, runOpts{}, "status", "nowhere")
	g.Expect(r.errOut).To(ContainSubstring("add -n NAMESPACE for another; -A lists every namespace"), r.String())
	for _, args := range [][]string{{"status"}, {"plan", "list"}} {
		r := run(t, other, runOpts{}, args...)
		g.Expect(r.code).To(Equal(cmdutil.ExitOK), "%v: %s", args, r)
		g.Expect(r.out).To(ContainSubstring("in namespace "+other), "%v", args)
		g.Expect(r.out).To(ContainSubstring("-A for every namespace"), "%v", args)
	}
}
