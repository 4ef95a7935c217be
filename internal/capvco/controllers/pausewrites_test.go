package controllers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
)

// writeRecorder records the controllers' writes to the Kubernetes API server.
type writeRecorder struct {
	rt   http.RoundTripper
	mu   sync.Mutex
	what []string
}

func (w *writeRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		w.mu.Lock()
		w.what = append(w.what, r.Method+" "+r.URL.Path)
		w.mu.Unlock()
	}
	return w.rt.RoundTrip(r)
}

func (w *writeRecorder) reset() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.what
	w.what = nil
	return out
}

// reconciled counts the successful reconciles the controllers logged for one object.
func (h *harness) reconciled(controller, name string) int {
	n := 0
	for _, l := range strings.Split(h.logs.String(), "\n") {
		if strings.Contains(l, `"msg"="Reconcile successful"`) && strings.Contains(l, `"controller"="`+controller+`"`) &&
			strings.Contains(l, `"name"="`+name+`"`) {
			n++
		}
	}
	return n
}

// TestPausedChangesNothing: the pause promise (internal/capi/reconciler.go: a paused object is
// never changed), as clusterctl move relies on it. While the Cluster is paused, reconciles of its
// VCOCluster, VCOMachine and VCOMachineTemplates still run (events keep coming) but make no
// platform call, create and delete nothing in the namespace, and change the objects only in what
// CAPI's contract asks of a paused object (Paused=True); a template created meanwhile gets no
// capacity until the pause ends.
func TestPausedChangesNothing(t *testing.T) {
	t.Parallel()
	writes := &writeRecorder{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { writes.rt = rt; return writes })
	h := newHarness(t, harnessOptions{config: cfg})
	g := NewWithT(t)
	ctx := context.Background()
	cluster, vc := h.cluster("frozen", nil)
	waitFor(h, vc, time.Minute, "provisioned", provisionedCluster)
	m := h.machine("frozen", "cp-0", true, nil)
	waitFor(h, m, time.Minute, "provisioned", provisionedMachine)

	g.Expect(h.get(cluster)).To(Succeed())
	pause := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Paused = ptr.To(true)
	g.Expect(env.Client.Patch(ctx, cluster, pause)).To(Succeed())
	waitFor(h, vc, 30*time.Second, "Paused", func(vc *capvcov1.VCOCluster) bool { return conditions.IsTrue(vc, clusterv1.PausedCondition) })
	waitFor(h, m, 30*time.Second, "Paused", func(m *capvcov1.VCOMachine) bool { return conditions.IsTrue(m, clusterv1.PausedCondition) })
	g.Expect(h.get(vc)).To(Succeed())
	g.Expect(h.get(m)).To(Succeed())
	frozenVC, frozenM := vc.DeepCopy(), m.DeepCopy()
	h.sim.ResetRequests()
	writes.reset()

	// Events while paused: a label on each object, a new template of the cluster.
	before := map[string]int{"VCOCluster": h.reconciled("VCOCluster", vc.Name), "VCOMachine": h.reconciled("VCOMachine", m.Name)}
	for _, o := range []client.Object{vc, m} {
		touch := client.MergeFrom(o.DeepCopyObject().(client.Object))
		labels := o.GetLabels()
		labels["touched"] = "yes"
		o.SetLabels(labels)
		g.Expect(env.Client.Patch(ctx, o, touch)).To(Succeed())
	}
	img := int64(1)
	tmpl := &capvcov1.VCOMachineTemplate{}
	tmpl.Namespace, tmpl.Name = h.ns, "frozen-md"
	tmpl.Labels = map[string]string{clusterv1.ClusterNameLabel: "frozen"}
	tmpl.Spec.Template.Spec = capvcov1.VCOMachineSpec{Image: capvcov1.ImageSpec{ID: &img}, VCPUs: 2, MemoryMiB: 4096, BootDiskGiB: 20}
	h.create(tmpl)
	g.Eventually(func() bool {
		return h.reconciled("VCOCluster", vc.Name) > before["VCOCluster"] && h.reconciled("VCOMachine", m.Name) > before["VCOMachine"] &&
			h.reconciled("VCOMachineTemplate", tmpl.Name) > 0
	}, time.Minute, 100*time.Millisecond).Should(BeTrue(), "every paused object was reconciled after its event")

	if n, what := h.mutating(); n > 0 {
		t.Fatalf("paused objects made %d mutating platform calls: %v", n, what)
	}
	// A reconcile that started from a cache older than its own Paused=True patch sends that
	// patch again; it changes nothing on the server (the resourceVersions below prove it). Any
	// other write is a broken promise.
	statusOf := map[string]bool{}
	for resource, name := range map[string]string{"vcoclusters": vc.Name, "vcomachines": m.Name} {
		statusOf[fmt.Sprintf("PATCH /apis/%s/namespaces/%s/%s/%s/status", capvcov1.GroupVersion, h.ns, resource, name)] = true
	}
	for _, w := range writes.reset() {
		if !statusOf[w] {
			t.Errorf("a paused object's reconcile wrote to the API server: %s", w)
		}
	}
	touchedVC, touchedM := vc.ResourceVersion, m.ResourceVersion
	g.Expect(h.get(vc)).To(Succeed())
	g.Expect(h.get(m)).To(Succeed())
	g.Expect(h.get(tmpl)).To(Succeed())
	g.Expect(vc.ResourceVersion).To(Equal(touchedVC), "the VCOCluster changed on the server while paused")
	g.Expect(m.ResourceVersion).To(Equal(touchedM), "the VCOMachine changed on the server while paused")
	g.Expect(vc.Spec).To(Equal(frozenVC.Spec))
	g.Expect(vc.Status).To(Equal(frozenVC.Status))
	g.Expect(m.Spec).To(Equal(frozenM.Spec))
	g.Expect(m.Status).To(Equal(frozenM.Status))
	g.Expect(tmpl.Status.Conditions).To(BeEmpty(), "a paused cluster's new template is left as it is")
	g.Expect(tmpl.Annotations).To(BeEmpty())

	// The pause ends: the template is reconciled at once (the Cluster's watch).
	g.Expect(h.get(cluster)).To(Succeed())
	unpause := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Paused = ptr.To(false)
	g.Expect(env.Client.Patch(ctx, cluster, unpause)).To(Succeed())
	waitFor(h, tmpl, 30*time.Second, "CapacityPublished after the pause", func(o *capvcov1.VCOMachineTemplate) bool {
		return conditions.Get(o, capvcov1.CapacityPublishedCondition) != nil
	})
	waitFor(h, vc, 30*time.Second, "not Paused", func(vc *capvcov1.VCOCluster) bool { return conditions.IsFalse(vc, clusterv1.PausedCondition) })
}
