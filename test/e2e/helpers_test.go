//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/state"
	"github.com/capx-io/capx/test/e2e/install"
)

// jobRun is a CAPTF Job as the recorder last saw it.
type jobRun struct {
	Name, Op, Kind, Owner string
	Created, Finished     time.Time
	Succeeded, Failed     bool
}

// jobRecorder watches the CAPTF Jobs of a namespace and remembers every one it saw, including
// those the garbage collector removed once their owner was gone: the evidence of which
// operations ran.
type jobRecorder struct {
	mu   sync.Mutex
	jobs map[string]*jobRun
}

func recordJobs(t *testing.T, m *install.Management, namespace string) *jobRecorder {
	t.Helper()
	cs, err := kubernetes.NewForConfig(m.Config)
	if err != nil {
		t.Fatal(err)
	}
	r := &jobRecorder{jobs: map[string]*jobRun{}}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	inf := f.Batch().V1().Jobs().Informer()
	seen := func(obj any) {
		if j, ok := obj.(*batchv1.Job); ok && j.Labels[captfv1.ManagedLabel] == "true" {
			r.saw(j)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj any) { seen(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	f.Start(stop)
	t.Cleanup(func() { close(stop); f.Shutdown() })
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("job recorder: cache did not sync")
	}
	return r
}

func (r *jobRecorder) saw(j *batchv1.Job) {
	r.mu.Lock()
	defer r.mu.Unlock()
	run := &jobRun{
		Name: j.Name, Op: j.Labels[captfv1.OperationLabel],
		Kind: j.Labels[captfv1.OwnerKindLabel], Owner: j.Labels[captfv1.OwnerNameLabel],
		Created: j.CreationTimestamp.Time,
	}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			run.Succeeded = true
		case batchv1.JobFailed:
			run.Failed = true
		}
	}
	if j.Status.CompletionTime != nil {
		run.Finished = j.Status.CompletionTime.Time
	}
	r.jobs[j.Name] = run
}

// runs returns the Jobs seen that match, oldest first.
func (r *jobRecorder) runs(match func(jobRun) bool) []jobRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []jobRun
	for _, j := range r.jobs {
		if match == nil || match(*j) {
			out = append(out, *j)
		}
	}
	sort.Slice(out, func(i, k int) bool {
		return out[i].Created.Before(out[k].Created) || out[i].Created.Equal(out[k].Created) && out[i].Name < out[k].Name
	})
	return out
}

// of matches the Jobs of one object and, when op is not empty, one operation.
func of(kind, owner, op string) func(jobRun) bool {
	return func(j jobRun) bool { return j.Kind == kind && j.Owner == owner && (op == "" || j.Op == op) }
}

func opIs(ops ...string) func(jobRun) bool {
	return func(j jobRun) bool {
		for _, op := range ops {
			if j.Op == op {
				return true
			}
		}
		return false
	}
}

func (r *jobRecorder) String() string {
	var b strings.Builder
	for _, j := range r.runs(nil) {
		result := "running"
		switch {
		case j.Succeeded:
			result = "succeeded"
		case j.Failed:
			result = "failed"
		}
		fmt.Fprintf(&b, "  %s %s %s/%s %s\n", j.Created.Format("15:04:05"), j.Op, j.Kind, j.Owner, result)
	}
	return b.String()
}

// captfObject is a CAPTF object of a cluster, by kind and name.
type captfObject struct{ Kind, Name string }

// captfObjects lists a cluster's TerraformCluster, TerraformMachines and TerraformMachinePools.
func captfObjects(g Gomega, ctx context.Context, m *install.Management, namespace, cluster string) []captfObject {
	in, of := client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}
	objs := []captfObject{{captfv1.KindCluster, cluster}}
	tms := &captfv1.TerraformMachineList{}
	g.Expect(m.Client.List(ctx, tms, in, of)).To(Succeed())
	for _, o := range tms.Items {
		objs = append(objs, captfObject{captfv1.KindMachine, o.Name})
	}
	pools := &captfv1.TerraformMachinePoolList{}
	g.Expect(m.Client.List(ctx, pools, in, of)).To(Succeed())
	for _, o := range pools.Items {
		objs = append(objs, captfObject{captfv1.KindMachinePool, o.Name})
	}
	return objs
}

// readState reads an object's OpenTofu state from its Secrets.
func readState(g Gomega, ctx context.Context, m *install.Management, namespace string, o captfObject) *state.Snapshot {
	snap, err := state.Read(ctx, m.Client, namespace, contract.StateSuffix(namespace, o.Kind, o.Name))
	g.Expect(err).NotTo(HaveOccurred(), "state of %s %s", o.Kind, o.Name)
	return snap
}

// workspaceOf returns the CAPTF object's workspace status and initialization.
func workspaceOf(g Gomega, ctx context.Context, m *install.Management, namespace string, o captfObject) (captfv1.WorkspaceStatus, bool, []metav1.Condition) {
	key := client.ObjectKey{Namespace: namespace, Name: o.Name}
	switch o.Kind {
	case captfv1.KindCluster:
		obj := &captfv1.TerraformCluster{}
		g.Expect(m.Client.Get(ctx, key, obj)).To(Succeed())
		return obj.Status.WorkspaceStatus, ptr.Deref(obj.Status.Initialization.Provisioned, false), obj.Status.Conditions
	case captfv1.KindMachine:
		obj := &captfv1.TerraformMachine{}
		g.Expect(m.Client.Get(ctx, key, obj)).To(Succeed())
		return obj.Status.WorkspaceStatus, ptr.Deref(obj.Status.Initialization.Provisioned, false), obj.Status.Conditions
	default:
		obj := &captfv1.TerraformMachinePool{}
		g.Expect(m.Client.Get(ctx, key, obj)).To(Succeed())
		return obj.Status.WorkspaceStatus, ptr.Deref(obj.Status.Initialization.Provisioned, false), obj.Status.Conditions
	}
}

// eventually polls an assertion function every second.
func eventually(t *testing.T, timeout time.Duration, fn func(g Gomega), what string) {
	t.Helper()
	NewWithT(t).Eventually(fn).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed(), what)
}
