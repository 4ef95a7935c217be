package jobs_test

import (
	"context"
	"flag"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/inputs"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/testenv"
)

var env *testenv.Env

// TestMain starts one API server with kube-controller-manager (the Job controller and the
// garbage collector) for the package, except for fuzzing, whose targets need none.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		os.Exit(m.Run())
	}
	os.Exit(testenv.Run(m, testenv.Options{ControllerManager: true}, &env))
}

// pool creates a real TerraformMachinePool (the garbage collector deletes what an absent
// owner owns) and returns its Owner.
func pool(t *testing.T, ns, name string) jobs.Owner {
	t.Helper()
	p := testenv.TerraformMachinePool(ns, name, "c1", "example.com/module:v1")
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	o, err := jobs.OwnerOf(p, "c1")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestBuiltJobsAreAccepted creates the Job of every operation on the API server, which
// validates them in full, and lists them back by owner.
func TestBuiltJobsAreAccepted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t)
	owner := pool(t, ns, "pool-1")
	other := pool(t, ns, "pool-2")

	var created []string
	for _, op := range []string{contract.OpPlan, contract.OpApply, contract.OpDestroy, contract.OpRefresh, contract.OpDrift, contract.OpRestore} {
		p := jobs.SampleParams()[op]
		p.Owner = owner
		job := jobs.Build(p)
		g.Expect(env.Client.Create(ctx, job)).To(Succeed(), op)
		created = append(created, job.Name)
	}
	p := jobs.SampleParams()[contract.OpApply]
	p.Owner = other
	g.Expect(env.Client.Create(ctx, jobs.Build(p))).To(Succeed())

	list, err := jobs.List(ctx, env.Client, owner)
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, j := range list {
		names = append(names, j.Name)
		g.Expect(jobs.Classify(&j)).To(Equal(jobs.PhaseActive))
	}
	g.Expect(names).To(ConsistOf(created))
}

// TestRunSecretGoesWithItsJob: the per-run Secret is owned by its Job, so pruning the Job
// (background propagation) makes the garbage collector delete the Secret too.
func TestRunSecretGoesWithItsJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t)
	p := jobs.SampleParams()[contract.OpApply]
	p.Owner = pool(t, ns, "pool-1")
	job := jobs.Build(p)
	g.Expect(env.Client.Create(ctx, job)).To(Succeed())

	r, err := inputs.Render(inputs.Source{
		Owner:       p.Owner,
		MachinePool: &inputs.MachinePoolInputs{MachinePoolName: "pool-1", Replicas: 1, BootstrapData: []byte("x")},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inputs.EnsureRun(ctx, env.Client, job, r)).To(BeTrue())
	key := client.ObjectKey{Namespace: ns, Name: jobs.RunSecretName(job.Name)}
	g.Expect(env.Client.Get(ctx, key, &corev1.Secret{})).To(Succeed())

	g.Expect(env.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, key, &corev1.Secret{}))
	}, 60*time.Second, 200*time.Millisecond).Should(BeTrue(), "garbage collector log:\n%s", env.ControllerManagerLog())
}
