package controllers_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/state"
	"github.com/capx-io/capx/internal/testenv"
)

// Builders and probes the scenario tests share (one scenario per file).

// scenario starts a scenario test in parallel with the others: in a namespace of its own,
// with a manager and a kubelet of its own that see only that namespace.
func scenario(t *testing.T, flags ...string) (string, *testenv.Kubelet) {
	t.Helper()
	t.Parallel()
	ns := env.NewNamespace(t)
	return ns, startManagerIn(t, ns, flags...)
}

// vars turns Go values into module variables.
func vars(kv map[string]any) map[string]apiextensionsv1.JSON {
	out := make(map[string]apiextensionsv1.JSON, len(kv))
	for k, v := range kv {
		raw, _ := json.Marshal(v)
		out[k] = apiextensionsv1.JSON{Raw: raw}
	}
	return out
}

// newTerraformCluster creates a Cluster and its TerraformCluster, with edit applied before the
// TerraformCluster is created.
func newTerraformCluster(t *testing.T, ns, name string, edit func(*captfv1.TerraformCluster)) *captfv1.TerraformCluster {
	t.Helper()
	cluster := testenv.Cluster(ns, name, "TerraformCluster", name)
	create(t, cluster)
	tc := testenv.TerraformCluster(ns, name, name, clusterImage)
	ownedBy(tc, cluster, "Cluster")
	if edit != nil {
		edit(tc)
	}
	create(t, tc)
	return tc
}

// newForeignCluster creates a Cluster whose infrastructure belongs to another provider: its
// machines get {} as the cluster's exports and wait for nothing, so a machine scenario runs
// one Job instead of two.
func newForeignCluster(t *testing.T, ns, name string) {
	t.Helper()
	c := testenv.Cluster(ns, name, "OtherCluster", name)
	c.Spec.InfrastructureRef.APIGroup = "infrastructure.example.com"
	create(t, c)
}

// newTerraformMachine creates a bootstrap Secret, a Machine of the cluster and its
// TerraformMachine, with edit applied before the TerraformMachine is created.
func newTerraformMachine(t *testing.T, ns, cluster, name string, edit func(*captfv1.TerraformMachine)) *captfv1.TerraformMachine {
	t.Helper()
	create(t, testenv.BootstrapSecret(ns, name+"-bootstrap", cluster, "#cloud-config\nhostname: "+name))
	m := testenv.Machine(ns, name, cluster, "TerraformMachine", name, name+"-bootstrap")
	create(t, m)
	tm := testenv.TerraformMachine(ns, name, cluster, machineImage)
	ownedBy(tm, m, "Machine")
	if edit != nil {
		edit(tm)
	}
	create(t, tm)
	return tm
}

// update re-reads obj, applies change and patches it (a merge patch: no conflicts with the
// manager's own writes).
func update[T client.Object](t *testing.T, obj T, change func(T)) {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatalf("get %T %s: %v", obj, obj.GetName(), err)
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	change(obj)
	if err := env.Client.Patch(ctx, obj, patch); err != nil {
		t.Fatalf("patch %T %s: %v", obj, obj.GetName(), err)
	}
}

// annotate sets (value != nil) or removes an annotation.
func annotate[T client.Object](t *testing.T, obj T, key string, value *string) {
	t.Helper()
	update(t, obj, func(o T) {
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		if value == nil {
			delete(a, key)
		} else {
			a[key] = *value
		}
		o.SetAnnotations(a)
	})
}

// hasCondition reports whether a condition has the status and reason.
func hasCondition(o capi.Object, typ string, status metav1.ConditionStatus, reason string) bool {
	c := conditions.Get(o, typ)
	return c != nil && c.Status == status && c.Reason == reason
}

// opsOf lists the operations of an object's Jobs.
func opsOf(t *testing.T, ns, kind, name string) []string {
	t.Helper()
	var out []string
	for _, j := range jobsOf(t, ns, kind, name) {
		out = append(out, j.Labels[captfv1.OperationLabel])
	}
	return out
}

// countJobs counts an object's Jobs of one operation.
func countJobs(t *testing.T, ns, kind, name string, op captfv1.Operation) int {
	t.Helper()
	n := 0
	for _, o := range opsOf(t, ns, kind, name) {
		if o == string(op) {
			n++
		}
	}
	return n
}

// watchActiveJobs folds what the namespace's running Jobs are, every 50 ms until the test ends,
// into a value the returned function reads.
func watchActiveJobs[R any](t *testing.T, ns string, fold func(R, []batchv1.Job) R) func() R {
	var mu sync.Mutex
	var acc R
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			running := activeJobs(t, ns)
			mu.Lock()
			acc = fold(acc, running)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return func() R {
		mu.Lock()
		defer mu.Unlock()
		return acc
	}
}

// activeJobs lists the namespace's CAPTF Jobs that have not finished.
func activeJobs(t *testing.T, ns string) []batchv1.Job {
	t.Helper()
	list := &batchv1.JobList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{captfv1.ManagedLabel: "true"}); err != nil {
		t.Fatal(err)
	}
	var out []batchv1.Job
	for _, j := range list.Items {
		if jobs.Classify(&j) == jobs.PhaseActive {
			out = append(out, j)
		}
	}
	return out
}

// readState reads an object's state, failing the test when it is unreadable.
func readState(t *testing.T, ns, kind, name string) *state.Snapshot {
	t.Helper()
	s, err := state.Read(context.Background(), env.Client, ns, contract.StateSuffix(ns, kind, name))
	if err != nil {
		t.Fatalf("read the state of %s %s: %v", kind, name, err)
	}
	return s
}

// never fails if cond turns true within d.
func never(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	NewWithT(t).Consistently(cond, d, 200*time.Millisecond).Should(BeFalse(), what)
}

// watchBlockMove checks until the test ends that the object carries clusterctl's block-move
// annotation whenever one of its Jobs runs: a Job seen running before and after a read of the
// object ran during that read. It returns the violations seen so far.
func watchBlockMove(t *testing.T, obj client.Object, kind string) func() []string {
	var mu sync.Mutex
	var bad []string
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	running := func() map[string]bool {
		list := &batchv1.JobList{}
		if err := env.Client.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{
			captfv1.OwnerKindLabel: kind, captfv1.OwnerNameLabel: obj.GetName(),
		}); err != nil {
			return nil
		}
		out := map[string]bool{}
		for i := range list.Items {
			if jobs.Classify(&list.Items[i]) == jobs.PhaseActive {
				out[list.Items[i].Name] = true
			}
		}
		return out
	}
	go func() {
		defer close(done)
		cur := obj.DeepCopyObject().(client.Object)
		for ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			before := running()
			if len(before) == 0 || env.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur) != nil {
				continue
			}
			if _, ok := cur.GetAnnotations()[clusterctlv1.BlockMoveAnnotation]; ok {
				continue
			}
			for name := range running() {
				if before[name] {
					mu.Lock()
					bad = append(bad, name)
					mu.Unlock()
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Compact(slices.Clone(bad))
	}
}
