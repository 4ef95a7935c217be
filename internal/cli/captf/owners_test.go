package captf_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capx-io/capx/internal/cli/captf/objects"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/testenv"
)

// owners check -A finds a broken owner reference in any namespace, and the repair it suggests
// covers every namespace too.
func TestOwnersCheckAllNamespaces(t *testing.T) {
	g := NewWithT(t)
	ns := env.NewNamespace(t)
	tc := testenv.TerraformCluster(ns, "owned", "owned", clusterImage)
	create(t, tc)
	labels := map[string]string{}
	for k, v := range objects.Wrap(tc).Owner().Selector() {
		labels[k] = v
	}
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "captf-state-backup-owned-1", Labels: labels}})

	r := run(t, env.NewNamespace(t), runOpts{}, "owners", "check", "-A")
	g.Expect(r.code).To(Equal(cmdutil.ExitFound), r.String())
	g.Expect(r.out).To(ContainSubstring("BROKEN  Secret captf-state-backup-owned-1 (state backup of TerraformCluster/owned): no owner reference"))
	g.Expect(r.out).To(ContainSubstring("Repair them with: kubectl captf owners repair -A --yes"))
	g.Expect(run(t, ns, runOpts{}, "owners", "check", "owned", "-A").code).To(Equal(cmdutil.ExitUsage))

	r = run(t, ns, runOpts{}, "owners", "repair", "-A", "--yes")
	g.Expect(r.code).To(Equal(cmdutil.ExitOK), r.String())
	g.Expect(r.out).To(ContainSubstring("FIXED"))
}
