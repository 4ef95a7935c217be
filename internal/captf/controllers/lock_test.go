package controllers_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/state"
)

// setLock writes the state lock Lease as the kubernetes backend leaves it when its holder dies
// without unlocking (SIGKILL, OOM, a lost node): holderIdentity is the lock ID and the lock-info
// annotation says who held it. An empty id unlocks, as the backend does.
func setLock(t *testing.T, ns, kind, name, id, who string) {
	t.Helper()
	ctx := context.Background()
	suffix := contract.StateSuffix(ns, kind, name)
	lease := &coordinationv1.Lease{}
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: contract.LockLeaseName(suffix)}, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: contract.LockLeaseName(suffix),
			Labels: map[string]string{
				contract.BackendStateLabel: "true", contract.BackendSuffixLabel: suffix,
				contract.BackendWorkspaceLabel: "default", contract.BackendManagedByLabel: "terraform",
			},
		}}
	} else if err != nil {
		t.Fatal(err)
	}
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Spec.HolderIdentity = nil
	delete(lease.Annotations, contract.LockInfoAnnotation)
	if id != "" {
		info, err := json.Marshal(state.LockInfo{
			ID: id, Operation: "OperationTypeApply", Who: who, Version: "1.12.6", Created: time.Now().UTC(),
		})
		if err != nil {
			t.Fatal(err)
		}
		lease.Spec.HolderIdentity = ptr.To(id)
		lease.Annotations[contract.LockInfoAnnotation] = string(info)
	}
	if lease.ResourceVersion == "" {
		err = env.Client.Create(ctx, lease)
	} else {
		err = env.Client.Update(ctx, lease)
	}
	if err != nil {
		t.Fatalf("write the lock Lease: %v", err)
	}
}

func lockHolder(t *testing.T, ns, kind, name string) string {
	t.Helper()
	l, err := state.ReadLock(context.Background(), env.Client, ns, contract.StateSuffix(ns, kind, name))
	if err != nil {
		t.Fatal(err)
	}
	return l.Holder
}

// TestStaleLock: a state lock left by one of the object's own runner Pods, whose Job is gone,
// is removed by the next Job (--force-unlock=<id>), which then succeeds; a lock held by anyone
// else is never broken: the object reports StateReadable=False/StateLocked and starts no Job
// until the holder lets go, whether or not a state exists yet.
func TestStaleLock(t *testing.T) {
	g := NewWithT(t)
	ns, _ := scenario(t)
	const kind = captfv1.KindCluster

	tc := newTerraformCluster(t, ns, "c1", nil)
	waitFor(t, tc, 2*time.Minute, "provisioned", func(o *captfv1.TerraformCluster) bool {
		return provisioned(o.Status.Initialization) && o.Status.ActiveJob == nil
	})
	applied := tc.Status.AppliedInputsHash

	// A runner Pod of an earlier apply Job of c1 died holding the lock; its Job was pruned since.
	// (The Pod's hostname is the Job's name plus the Job controller's random suffix.)
	const staleID = "5d3f3c1e-0b5a-4c1e-9a51-0c0ffee0ddba"
	earlier := jobs.Name(kind, "c1", contract.OpApply, 1, "an-earlier-inputs-hash")
	setLock(t, ns, kind, "c1", staleID, "root@"+earlier+"-x7k2p")
	update(t, tc, func(o *captfv1.TerraformCluster) { o.Spec.Variables = vars(map[string]any{"endpoint_port": 7443}) })
	waitFor(t, tc, 2*time.Minute, "the change applied", func(o *captfv1.TerraformCluster) bool {
		return o.Status.ActiveJob == nil && o.Status.AppliedInputsHash != applied &&
			hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionTrue, captfv1.ApplySucceededReason)
	})
	last := jobsOf(t, ns, kind, "c1")
	jobs.SortNewestFirst(last)
	g.Expect(last[0].Spec.Template.Spec.Containers[0].Args).To(ContainElement("--force-unlock="+staleID),
		"the Job removes the stale lock of its own predecessor")
	g.Expect(lockHolder(t, ns, kind, "c1")).To(BeEmpty(), "the lock was released")
	applied = tc.Status.AppliedInputsHash

	// Issue 9: the holder's Job was deleted while its Pod is still in its shutdown grace,
	// saving state. The lock is not stale until that Pod has stopped: nothing starts (two
	// writers on one state), and then the next Job removes the lock. (The Pod is not the
	// kubelet stand-in's: its phase is written by hand.)
	const stoppingID = "7a6b5c4d-3e2f-1a0b-9c8d-7e6f5a4b3c2d"
	stopping := jobs.Name(kind, "c1", contract.OpApply, 1, "a-deleted-jobs-inputs-hash")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: stopping + "-q8w4z", Labels: map[string]string{batchv1.JobNameLabel: stopping}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "source", Image: clusterImage}}},
	}
	create(t, pod)
	pod.Status.Phase = corev1.PodRunning
	g.Expect(env.Client.Status().Update(context.Background(), pod)).To(Succeed())
	setLock(t, ns, kind, "c1", stoppingID, "root@"+pod.Name)
	jobsBefore := len(jobsOf(t, ns, kind, "c1"))
	update(t, tc, func(o *captfv1.TerraformCluster) { o.Spec.Variables = vars(map[string]any{"endpoint_port": 7444}) })
	waitFor(t, tc, time.Minute, "held while the holder's Pod stops", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.StateReadableCondition, metav1.ConditionFalse, captfv1.StateLockedReason)
	})
	g.Expect(describe(tc)).To(ContainSubstring("still running or terminating"))
	never(t, 4*time.Second, "a Job started while the lock holder's Pod runs", func() bool {
		return len(jobsOf(t, ns, kind, "c1")) > jobsBefore
	})
	pod.Status.Phase = corev1.PodFailed
	g.Expect(env.Client.Status().Update(context.Background(), pod)).To(Succeed())
	annotate(t, tc, "capx.test/touch", ptr.To("stopped"))
	waitFor(t, tc, 2*time.Minute, "the change applied once the Pod stopped", func(o *captfv1.TerraformCluster) bool {
		return o.Status.ActiveJob == nil && o.Status.AppliedInputsHash != applied &&
			hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionTrue, captfv1.ApplySucceededReason)
	})
	last = jobsOf(t, ns, kind, "c1")
	jobs.SortNewestFirst(last)
	g.Expect(last[0].Spec.Template.Spec.Containers[0].Args).To(ContainElement("--force-unlock=" + stoppingID))
	applied = tc.Status.AppliedInputsHash

	// Someone else's run (a person's tofu) holds the lock: the next change waits.
	setLock(t, ns, kind, "c1", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "alice@laptop")
	jobsBefore = len(jobsOf(t, ns, kind, "c1"))
	update(t, tc, func(o *captfv1.TerraformCluster) { o.Spec.Variables = vars(map[string]any{"endpoint_port": 8443}) })
	waitFor(t, tc, time.Minute, "held by the foreign lock", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.StateReadableCondition, metav1.ConditionFalse, captfv1.StateLockedReason)
	})
	g.Expect(describe(tc)).To(ContainSubstring("alice@laptop"))
	never(t, 4*time.Second, "a Job started under a foreign lock", func() bool {
		return len(jobsOf(t, ns, kind, "c1")) > jobsBefore
	})

	// The holder finishes: the change applies, without breaking anyone's lock. (The lock Lease
	// is not watched: a held object looks again within a minute; the touch saves the wait.)
	setLock(t, ns, kind, "c1", "", "")
	annotate(t, tc, "capx.test/touch", ptr.To("1"))
	waitFor(t, tc, 2*time.Minute, "the change applied once the lock was released", func(o *captfv1.TerraformCluster) bool {
		return o.Status.ActiveJob == nil && o.Status.AppliedInputsHash != applied &&
			hasCondition(o, captfv1.StateReadableCondition, metav1.ConditionTrue, captfv1.StateReadReason)
	})

	// A foreign lock on a state that does not exist yet holds the first apply too.
	setLock(t, ns, kind, "c2", "9e8d7c6b-5a49-3827-1605-f4e3d2c1b0a9", "ci@runner-42")
	c2 := newTerraformCluster(t, ns, "c2", nil)
	waitFor(t, c2, time.Minute, "held by the foreign lock", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.StateReadableCondition, metav1.ConditionFalse, captfv1.StateLockedReason)
	})
	never(t, 4*time.Second, "a Job started under a foreign lock", func() bool {
		return len(jobsOf(t, ns, kind, "c2")) > 0
	})
}
