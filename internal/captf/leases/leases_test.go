package leases

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(testenv.Run(m, testenv.Options{}, &env))
}

// fixture is one namespace with a cluster, its machines and pools, leases on a fake clock,
// and the writes they made.
type fixture struct {
	t      *testing.T
	ns     string
	clock  *clocktesting.FakeClock
	leases *Leases
	mu     sync.Mutex
	writes []string
	// conflictOnUpdate makes the next Update fail as if another reconcile won the race.
	conflictOnUpdate bool
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, ns: env.NewNamespace(t), clock: clocktesting.NewFakeClock(time.Now())}
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// record notes the writes that changed something (a create refused with AlreadyExists
	// changes nothing).
	record := func(op string, obj client.Object, err error) error {
		if err == nil {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.writes = append(f.writes, op+" "+obj.GetName())
		}
		return err
	}
	counted := interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return record("create", obj, c.Create(ctx, obj, opts...))
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if f.conflictOnUpdate {
				f.conflictOnUpdate = false
				return apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, obj.GetName(), fmt.Errorf("changed"))
			}
			return record("update", obj, c.Update(ctx, obj, opts...))
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return record("delete", obj, c.Delete(ctx, obj, opts...))
		},
	})
	f.leases = New(counted, env.Client, f.clock)
	return f
}

func (f *fixture) takeWrites() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.writes
	f.writes = nil
	return w
}

// object creates a CAPTF object of kind in cluster c1 and returns its Owner.
func (f *fixture) object(kind, name string) jobs.Owner {
	f.t.Helper()
	var obj client.Object
	switch kind {
	case captfv1.KindCluster:
		obj = testenv.TerraformCluster(f.ns, name, "c1", "example.com/m:v1")
	case captfv1.KindMachine:
		obj = testenv.TerraformMachine(f.ns, name, "c1", "example.com/m:v1")
	default:
		obj = testenv.TerraformMachinePool(f.ns, name, "c1", "example.com/m:v1")
	}
	if err := env.Client.Create(context.Background(), obj); err != nil {
		f.t.Fatal(err)
	}
	o, err := jobs.OwnerOf(obj, "c1")
	if err != nil {
		f.t.Fatal(err)
	}
	return o
}

// job creates the holder Job (it stays active: no Job controller runs here).
func (f *fixture) job(name string) {
	f.t.Helper()
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "example.com/x:v1"}},
		}}},
	}
	if err := env.Client.Create(context.Background(), j); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) lease(name string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, l)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return l
}

func req(o jobs.Owner, holder, op string) Request {
	return Request{Owner: o, Holder: holder, Op: op, ActiveDeadlineSeconds: 3600, Gate: true}
}

func TestTakeAndRelease(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	m := f.object(captfv1.KindMachine, "m1")
	name := RunLeaseName(m)

	w, err := f.leases.Take(ctx, req(m, "job-a", contract.OpApply))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w).To(BeNil())
	g.Expect(f.takeWrites()).To(Equal([]string{"create " + name}))
	l := f.lease(name)
	g.Expect(*l.Spec.HolderIdentity).To(Equal("job-a"))
	g.Expect(*l.Spec.LeaseDurationSeconds).To(Equal(int32(4500)), "deadline + 600 s + 300 s")
	g.Expect(l.Labels).To(Equal(map[string]string{
		"captf.io/managed": "true", "captf.io/lease": "run",
		"captf.infrastructure.cluster.x-k8s.io/owner-kind": "TerraformMachine",
		"captf.infrastructure.cluster.x-k8s.io/owner-name": "m1",
		"cluster.x-k8s.io/cluster-name":                    "c1",
		"clusterctl.cluster.x-k8s.io/move":                 "",
	}))
	g.Expect(l.Annotations).To(HaveKeyWithValue(captfv1.LeaseOpAnnotation, "apply"))
	g.Expect(l.Annotations).To(HaveKeyWithValue(captfv1.LeaseAcquiredAtAnnotation, f.clock.Now().UTC().Format(time.RFC3339Nano)))
	g.Expect(l.OwnerReferences).To(ConsistOf(m.ControllerRef()))

	// The same reconcile again (the Job was not created yet): ours, fresh, no write.
	w, err = f.leases.Take(ctx, req(m, "job-a", contract.OpApply))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w).To(BeNil())
	g.Expect(f.takeWrites()).To(BeEmpty())

	// Ours but half the grace old: taken again, so the Job still has a full grace to appear.
	f.clock.Step(31 * time.Second)
	g.Expect(f.leases.Take(ctx, req(m, "job-a", contract.OpApply))).To(BeNil())
	g.Expect(f.takeWrites()).To(Equal([]string{"update " + name}))
	g.Expect(f.lease(name).Spec.AcquireTime.Time.Unix()).To(Equal(f.clock.Now().Unix()))

	// Another Job of the object waits while job-a runs.
	f.job("job-a")
	w, err = f.leases.Take(ctx, req(m, "job-b", contract.OpRefresh))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w).To(Equal(&Wait{Reason: "WaitingForRunLease", Holders: []string{"job-a"},
		Message: "Waiting for Job job-a, which holds Lease " + name + ", to finish"}))

	// Releasing with the wrong holder does nothing; with the right one deletes the lease.
	g.Expect(f.leases.Release(ctx, m, "job-b")).To(Succeed())
	g.Expect(f.lease(name)).NotTo(BeNil())
	g.Expect(f.leases.Release(ctx, m, "job-a")).To(Succeed())
	g.Expect(f.lease(name)).To(BeNil())
	g.Expect(f.leases.Release(ctx, m, "job-a")).To(Succeed(), "releasing twice is fine")
	g.Expect(f.takeWrites()).To(Equal([]string{"delete " + name}))
}

func TestTakeOver(t *testing.T) {
	ctx := context.Background()

	// Issue 25: an earlier pass of the object took the lease and ended without creating its
	// Job (an error in between, a crash, inputs edited again since). Nothing will create that
	// Job, and the object's own passes never overlap: its next Job takes the lease at once
	// instead of waiting out a grace for a Job that does not exist.
	t.Run("a holder that was never created, at once", func(t *testing.T) {
		g := NewWithT(t)
		f := newFixture(t)
		m := f.object(captfv1.KindMachine, "m1")
		g.Expect(f.leases.Take(ctx, req(m, "never-created", contract.OpApply))).To(BeNil())
		w, err := f.leases.Take(ctx, req(m, "next", contract.OpApply))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(w).To(BeNil())
		g.Expect(*f.lease(RunLeaseName(m)).Spec.HolderIdentity).To(Equal("next"))
		obs, err := f.leases.Observe(ctx, m, true)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(obs.Run).To(BeNil(), "the observation agrees")
	})

	t.Run("so does a cluster's claim on its cluster lease", func(t *testing.T) {
		g := NewWithT(t)
		f := newFixture(t)
		c := f.object(captfv1.KindCluster, "c1")
		member := f.object(captfv1.KindMachine, "m1")
		g.Expect(f.leases.Take(ctx, req(member, "m1-apply", contract.OpApply))).To(BeNil())
		f.job("m1-apply")
		w, err := f.leases.Take(ctx, req(c, "c1-apply-old", contract.OpApply))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(w.Reason).To(Equal("WaitingForMachineOperations"), "the claim keeps both leases")
		g.Expect(f.leases.Release(ctx, member, "m1-apply")).To(Succeed())
		// The cluster's inputs changed meanwhile: its next Job has another name.
		g.Expect(f.leases.Take(ctx, req(c, "c1-apply-new", contract.OpApply))).To(BeNil())
		g.Expect(*f.lease(ClusterLeaseName(f.ns, "c1")).Spec.HolderIdentity).To(Equal("c1-apply-new"))
	})

	t.Run("a running holder, only after the backstop", func(t *testing.T) {
		g := NewWithT(t)
		f := newFixture(t)
		m := f.object(captfv1.KindMachine, "m1")
		f.job("running")
		g.Expect(f.leases.Take(ctx, req(m, "running", contract.OpApply))).To(BeNil())
		f.clock.Step(74 * time.Minute)
		g.Expect(f.leases.Take(ctx, req(m, "next", contract.OpApply))).NotTo(BeNil())
		f.clock.Step(2 * time.Minute)
		g.Expect(f.leases.Take(ctx, req(m, "next", contract.OpApply))).To(BeNil())
	})

	t.Run("a deleted holder whose Pod still runs, only once the Pod is done", func(t *testing.T) {
		// Issue 9: a Job deleted while its Pod is in its shutdown grace is gone at once, but the
		// Pod may still be saving state. (No kubelet runs here: the Pod's phase is written.)
		g := NewWithT(t)
		f := newFixture(t)
		m := f.object(captfv1.KindMachine, "m1")
		g.Expect(f.leases.Take(ctx, req(m, "deleted", contract.OpApply))).To(BeNil())
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "deleted-x7k2p", Labels: map[string]string{batchv1.JobNameLabel: "deleted"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/x:v1"}}},
		}
		g.Expect(env.Client.Create(ctx, pod)).To(Succeed())
		pod.Status.Phase = corev1.PodRunning
		g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
		f.clock.Step(2 * time.Minute)
		w, err := f.leases.Take(ctx, req(m, "next", contract.OpApply))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(w).NotTo(BeNil(), "the Pod of the deleted holder still runs")
		pod.Status.Phase = corev1.PodSucceeded
		g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
		g.Expect(f.leases.Take(ctx, req(m, "next", contract.OpApply))).To(BeNil())
		g.Expect(*f.lease(RunLeaseName(m)).Spec.HolderIdentity).To(Equal("next"))
	})

	t.Run("a lost race waits for the next reconcile", func(t *testing.T) {
		g := NewWithT(t)
		f := newFixture(t)
		m := f.object(captfv1.KindMachine, "m1")
		g.Expect(f.leases.Take(ctx, req(m, "old", contract.OpApply))).To(BeNil())
		f.clock.Step(2 * time.Minute)
		f.conflictOnUpdate = true
		w, err := f.leases.Take(ctx, req(m, "next", contract.OpApply))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(w.Reason).To(Equal("WaitingForRunLease"))
		g.Expect(w.Message).To(ContainSubstring("changed while it was being taken"))
		g.Expect(*f.lease(RunLeaseName(m)).Spec.HolderIdentity).To(Equal("old"), "never retried in the same pass")
	})
}

func TestOperationGate(t *testing.T) {
	ctx := context.Background()

	t.Run("a cluster waits for its members' mutating Jobs and keeps its leases", func(t *testing.T) {
		g := NewWithT(t)
		f := newFixture(t)
		c := f.object(captfv1.KindCluster, "c1")
		var members []string
		for i := range 7 {
			o := f.object(captfv1.KindMachine, fmt.Sprintf("m%d", i))
			holder := fmt.Sprintf("m%d-apply", i)
			g.Expect(f.leases.Take(ctx, req(o, holder, contract.OpApply))).To(BeNil())
			members = append(members, holder)
		}
		p := f.object(captfv1.KindMachinePool, "p1")
		g.Expect(f.leases.Take(ctx, req(p, "p1-refresh", contract.OpRefresh))).To(BeNil(), "read-only")
		f.takeWrites()

		w, err := f.leases.Take(ctx, req(c, "c1-apply", contract.OpApply))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(w.Reason).To(Equal("WaitingForMachineOperations"))
		g.Expect(w.Holders).To(Equal(members), "the pool's refresh is not waited for")
		g.Expect(w.Message).To(Equal("Waiting for 7 machine and pool Jobs to finish: m0-apply, m1-apply, m2-apply, m3-apply, m4-apply and 2 more"))
		cluster := ClusterLeaseName(f.ns, "c1")
		g.Expect(f.takeWrites()).To(Equal([]string{"create " + RunLeaseName(c), "create " + cluster}))
		g.Expect(f.lease(cluster).Labels).To(HaveKeyWithValue("captf.io/lease", "cluster"))

		// A member that comes later sees the cluster and gives its own lease back.
		late := f.object(captfv1.KindMachinePool, "p2")
		w, err = f.leases.Take(ctx, req(late, "p2-apply", contract.OpApply))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(w).To(Equal(&Wait{Reason: "WaitingForClusterOperation", Holders: []string{"c1-apply"},
			Message: "Waiting for the TerraformCluster's Job c1-apply to finish (Lease " + cluster + ")"}))
		g.Expect(f.lease(RunLeaseName(late))).To(BeNil())

		// Once the members are done, the cluster proceeds; its release frees both leases.
		for i := range 7 {
			o := jobs.Owner{Kind: captfv1.KindMachine, Namespace: f.ns, Name: fmt.Sprintf("m%d", i)}
			g.Expect(f.leases.Release(ctx, o, members[i])).To(Succeed())
		}
		g.Expect(f.leases.Take(ctx, req(c, "c1-apply", contract.OpApply))).To(BeNil())
		g.Expect(f.leases.Release(ctx, c, "c1-apply")).To(Succeed())
		g.Expect(f.lease(cluster)).To(BeNil())
		g.Expect(f.lease(RunLeaseName(c))).To(BeNil())
		g.Expect(f.leases.Take(ctx, req(late, "p2-apply", contract.OpApply))).To(BeNil())
	})

	t.Run("a cluster's read-only Jobs and ungated requests take no cluster lease", func(t *testing.T) {
		g := NewWithT(t)
		f := newFixture(t)
		c := f.object(captfv1.KindCluster, "c1")
		m := f.object(captfv1.KindMachine, "m1")
		g.Expect(f.leases.Take(ctx, req(m, "m1-apply", contract.OpApply))).To(BeNil())
		g.Expect(f.leases.Take(ctx, req(c, "c1-drift", contract.OpDrift))).To(BeNil())
		g.Expect(f.leases.Release(ctx, c, "c1-drift")).To(Succeed())
		ungated := req(c, "c1-apply", contract.OpApply)
		ungated.Gate = false
		g.Expect(f.leases.Take(ctx, ungated)).To(BeNil())
		g.Expect(f.lease(ClusterLeaseName(f.ns, "c1"))).To(BeNil())
	})

	t.Run("a finished cluster Job no longer holds its members", func(t *testing.T) {
		g := NewWithT(t)
		f := newFixture(t)
		c := f.object(captfv1.KindCluster, "c1")
		m := f.object(captfv1.KindMachine, "m1")
		g.Expect(f.leases.Take(ctx, req(c, "c1-apply", contract.OpApply))).To(BeNil())
		// The cluster's Job was never created (it crashed); after the grace members proceed.
		f.clock.Step(Grace + time.Second)
		g.Expect(f.leases.Take(ctx, req(m, "m1-apply", contract.OpApply))).To(BeNil())
		g.Expect(*f.lease(RunLeaseName(m)).Spec.HolderIdentity).To(Equal("m1-apply"))
	})
}
