package controllers_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// TestClusterDeletedDuringItsFirstDNSWrite: a cluster deleted while its A record's first
// write is still running is torn down without leaving the record: the teardown's DNS step waits
// for that create, then deletes the record, and only then deletes the cloudspace. (Today's
// HEAD, 4d97e0c, passed the DNS step at once, deleted the cloudspace, and the create then put
// the record on a cloudspace that no longer existed.)
func TestClusterDeletedDuringItsFirstDNSWrite(t *testing.T) {
	t.Parallel()
	inWrite, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	// The held create must outlast the test's look at the teardown however loaded the machine
	// is: with the harness's 2 s client timeout it ended "outcome unknown" mid-test under load,
	// and the teardown then rightly moved on.
	h := newHarness(t, harnessOptions{sim: vcosim.Options{DNSWriting: func(string) {
		once.Do(func() { close(inWrite); <-release })
	}}, clientOp: vco.Options{Timeout: 10 * time.Minute}})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	g := NewWithT(t)
	ctx := context.Background()
	cluster, vc := h.cluster("early", func(vc *capvcov1.VCOCluster) { vc.Spec.DNS = &capvcov1.DNSSpec{Name: "api.early.acme.example"} })
	select {
	case <-inWrite:
	case <-time.After(time.Minute):
		t.Fatal("the A record's create never started")
	}
	g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	// Let the teardown run as far as it goes while the create is held: to the DNS step, or
	// (without the wait) past it and through the cloudspace delete.
	waitFor(h, vc, time.Minute, "the teardown at its DNS step or past it", func(vc *capvcov1.VCOCluster) bool {
		c := conditions.Get(vc, clusterv1.DeletingCondition)
		return c != nil && (strings.Contains(c.Message, "deleting the DNS record") || strings.Contains(c.Message, "deleting the cloudspaces"))
	})
	g.Consistently(func() bool {
		return apierrors.IsNotFound(h.get(vc)) || strings.Contains(conditions.Get(vc, clusterv1.DeletingCondition).Message, "deleting the DNS record")
	}, time.Second, 50*time.Millisecond).Should(BeTrue(), "the teardown went past the DNS step while the record's create ran")
	close(release)
	h.waitGone(vc, 2*time.Minute)
	h.assertNothingLeft(nil)
}
