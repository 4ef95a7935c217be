package controllers_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/leases"
)

// TestNoWaitOnAJobThatWasNeverCreated (issue 25): an earlier pass of a pool took its run lease
// for a Job it never created (it ended in between: an error, a crash, inputs edited again
// since). Nothing will ever create that Job, so the pool's next apply does not wait on it: it
// takes the lease over and runs, and the pool never reports a wait for a Job that does not
// exist.
func TestNoWaitOnAJobThatWasNeverCreated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := scenario(t)
	newForeignCluster(t, ns, "f")
	_, tmp := newPool(t, ns, "f", "workers", 1)
	waitFor(t, tmp, 2*time.Minute, "provisioned", func(o *captfv1.TerraformMachinePool) bool {
		return provisioned(o.Status.Initialization) && o.Status.ActiveJob == nil
	})
	owner, err := jobs.OwnerOf(tmp, "f")
	g.Expect(err).NotTo(HaveOccurred())
	const phantom = "captf-mp-workers-apply-a9-0000ff"

	// The lease as such a pass leaves it: its holder names a Job of the pool that does not exist.
	name := leases.RunLeaseName(owner)
	g.Eventually(func() error {
		now := metav1.NewMicroTime(time.Now())
		l := &coordinationv1.Lease{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, l)
		switch {
		case apierrors.IsNotFound(err):
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
				Labels:      map[string]string{captfv1.ManagedLabel: "true", captfv1.LeaseLabel: leases.KindRun},
				Annotations: map[string]string{captfv1.LeaseOpAnnotation: contract.OpApply}}}
			l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To(phantom), LeaseDurationSeconds: ptr.To[int32](4500),
				AcquireTime: &now, RenewTime: &now}
			return env.Client.Create(ctx, l)
		case err != nil:
			return err
		}
		l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime = ptr.To(phantom), &now, &now
		return env.Client.Update(ctx, l)
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

	// Watch the pool's conditions from now on.
	var mu sync.Mutex
	var waits []string
	stop := poll(t, func() {
		o := &captfv1.TerraformMachinePool{}
		if env.Client.Get(ctx, client.ObjectKeyFromObject(tmp), o) != nil {
			return
		}
		if c := conditions.Get(o, captfv1.ApplyJobSucceededCondition); c != nil && c.Reason == captfv1.WaitingForRunLeaseReason {
			mu.Lock()
			if !slices.Contains(waits, c.Message) {
				waits = append(waits, c.Message)
			}
			mu.Unlock()
		}
	})

	applies := countJobs(t, ns, captfv1.KindMachinePool, "workers", captfv1.OperationApply)
	update(t, tmp, func(o *captfv1.TerraformMachinePool) {
		o.Spec.Variables = vars(map[string]any{"health_state": "degraded"})
	})
	waitFor(t, tmp, 2*time.Minute, "the change applied", func(o *captfv1.TerraformMachinePool) bool {
		return o.Status.Health != nil && o.Status.Health.State == "degraded" && o.Status.ActiveJob == nil
	})
	stop()
	g.Expect(countJobs(t, ns, captfv1.KindMachinePool, "workers", captfv1.OperationApply)).To(Equal(applies + 1))
	mu.Lock()
	defer mu.Unlock()
	g.Expect(waits).To(BeEmpty(), "the pool waited on Job %s, which was never created", phantom)
}
