package capi_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, testenv.Options{}, &env)) }

// startManager runs a manager with every kind of both providers wired to the shared plumbing
// alone (capi.PlumbingOnly), against the test API server.
func startManager(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:  env.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, setup := range []func() error{
		func() error {
			return (&capi.Reconciler[*captfv1.TerraformCluster, struct{}]{
				Client: mgr.GetClient(), Role: capi.InfraCluster, Finalizer: captfv1.TerraformClusterFinalizer,
				New:      func() *captfv1.TerraformCluster { return &captfv1.TerraformCluster{} },
				NewList:  func() client.ObjectList { return &captfv1.TerraformClusterList{} },
				Provider: capi.PlumbingOnly[*captfv1.TerraformCluster]{},
			}).SetupWithManager(ctx, mgr, capi.SetupOptions{})
		},
		func() error {
			return (&capi.Reconciler[*captfv1.TerraformMachine, struct{}]{
				Client: mgr.GetClient(), Role: capi.InfraMachine, Finalizer: captfv1.TerraformMachineFinalizer,
				New:      func() *captfv1.TerraformMachine { return &captfv1.TerraformMachine{} },
				NewList:  func() client.ObjectList { return &captfv1.TerraformMachineList{} },
				Provider: capi.PlumbingOnly[*captfv1.TerraformMachine]{},
			}).SetupWithManager(ctx, mgr, capi.SetupOptions{})
		},
		func() error {
			return (&capi.Reconciler[*captfv1.TerraformMachinePool, struct{}]{
				Client: mgr.GetClient(), Role: capi.InfraMachinePool, Finalizer: captfv1.TerraformMachinePoolFinalizer,
				New:      func() *captfv1.TerraformMachinePool { return &captfv1.TerraformMachinePool{} },
				NewList:  func() client.ObjectList { return &captfv1.TerraformMachinePoolList{} },
				Provider: capi.PlumbingOnly[*captfv1.TerraformMachinePool]{},
			}).SetupWithManager(ctx, mgr, capi.SetupOptions{})
		},
		func() error {
			return (&capi.Reconciler[*capvcov1.VCOCluster, struct{}]{
				Client: mgr.GetClient(), Role: capi.InfraCluster, Finalizer: capvcov1.VCOClusterFinalizer,
				New:      func() *capvcov1.VCOCluster { return &capvcov1.VCOCluster{} },
				NewList:  func() client.ObjectList { return &capvcov1.VCOClusterList{} },
				Provider: capi.PlumbingOnly[*capvcov1.VCOCluster]{},
			}).SetupWithManager(ctx, mgr, capi.SetupOptions{})
		},
		func() error {
			return (&capi.Reconciler[*capvcov1.VCOMachine, struct{}]{
				Client: mgr.GetClient(), Role: capi.InfraMachine, Finalizer: capvcov1.VCOMachineFinalizer,
				New:      func() *capvcov1.VCOMachine { return &capvcov1.VCOMachine{} },
				NewList:  func() client.ObjectList { return &capvcov1.VCOMachineList{} },
				Provider: capi.PlumbingOnly[*capvcov1.VCOMachine]{},
			}).SetupWithManager(ctx, mgr, capi.SetupOptions{})
		},
	} {
		if err := setup(); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager stopped with %v", err)
		}
	})
}

// owned sets a controller owner reference the way CAPI's controllers do.
func owned(obj client.Object, owner client.Object, kind string) {
	obj.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: clusterv1.GroupVersion.String(), Kind: kind,
		Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true),
	}})
}

func TestSharedPlumbingOnBothProviders(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	ns := env.NewNamespace(t)
	c := env.Client

	tfCluster := testenv.Cluster(ns, "tf", "TerraformCluster", "tf")
	vcoCluster := testenv.Cluster(ns, "vco", "VCOCluster", "vco")
	g.Expect(c.Create(ctx, tfCluster)).To(Succeed())
	g.Expect(c.Create(ctx, vcoCluster)).To(Succeed())

	tfc := testenv.TerraformCluster(ns, "tf", "tf", "example.com/cluster:v1")
	owned(tfc, tfCluster, "Cluster")
	vc := testenv.VCOCluster(ns, "vco", "vco", "nl-rmd-dc01-001", "creds")
	owned(vc, vcoCluster, "Cluster")

	machine := testenv.Machine(ns, "m1", "tf", "TerraformMachine", "m1", "")
	pool := testenv.MachinePool(ns, "p1", "tf", "TerraformMachinePool", "p1", "", 2)
	vcoMachine := testenv.Machine(ns, "vm1", "vco", "VCOMachine", "vm1", "")
	for _, o := range []client.Object{machine, pool, vcoMachine} {
		g.Expect(c.Create(ctx, o)).To(Succeed())
	}
	tfm := testenv.TerraformMachine(ns, "m1", "tf", "example.com/machine:v1")
	owned(tfm, machine, "Machine")
	tfmp := testenv.TerraformMachinePool(ns, "p1", "tf", "example.com/pool:v1")
	owned(tfmp, pool, "MachinePool")
	vm := testenv.VCOMachine(ns, "vm1", "vco", 7)
	owned(vm, vcoMachine, "Machine")
	orphan := testenv.TerraformMachine(ns, "orphan", "tf", "example.com/machine:v1")

	infra := []capi.Object{tfc, vc, tfm, tfmp, vm}
	for _, o := range append(infra, orphan) {
		g.Expect(c.Create(ctx, o)).To(Succeed())
	}

	t.Run("finalizers and conditions land on every owned object", func(t *testing.T) {
		for _, o := range infra {
			eventually(t, o, func(o capi.Object) bool {
				return controllerutil.ContainsFinalizer(o, finalizerOf(o)) &&
					conditions.IsFalse(o, clusterv1.PausedCondition) &&
					conditions.IsTrue(o, capi.ReadyCondition)
			}, "finalizer, Paused=False and Ready=True")
		}
	})

	t.Run("an object CAPI has not adopted yet is left alone", func(t *testing.T) {
		consistently(t, orphan, func(o capi.Object) bool {
			return len(o.GetFinalizers()) == 0 && len(o.GetConditions()) == 0
		}, "no finalizer and no conditions")
	})

	t.Run("pausing the cluster sets Paused and stops every change, deletion included", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(patchCluster(ctx, tfCluster, true)).To(Succeed())
		for _, o := range []capi.Object{tfc, tfm, tfmp} {
			eventually(t, o, func(o capi.Object) bool {
				cond := conditions.Get(o, clusterv1.PausedCondition)
				return cond != nil && cond.Status == metav1.ConditionTrue &&
					cond.Message == "Cluster spec.paused is true"
			}, "Paused=True naming Cluster spec.paused")
		}
		g.Expect(c.Delete(ctx, tfm)).To(Succeed())
		eventually(t, tfm, func(o capi.Object) bool {
			cond := conditions.Get(o, clusterv1.DeletingCondition)
			return cond != nil && cond.Status == metav1.ConditionTrue &&
				cond.Message == "Deletion waits until the object is unpaused (Cluster spec.paused is true)"
		}, "Deleting=True saying the deletion waits for unpause")
		consistently(t, tfm, func(o capi.Object) bool {
			return controllerutil.ContainsFinalizer(o, captfv1.TerraformMachineFinalizer)
		}, "the finalizer kept while paused")

		g.Expect(patchCluster(ctx, tfCluster, false)).To(Succeed())
		gone(t, tfm)
	})

	t.Run("the paused annotation pauses one object", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(vm), vm)).To(Succeed())
		vm.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
		g.Expect(c.Update(ctx, vm)).To(Succeed())
		eventually(t, vm, func(o capi.Object) bool {
			return conditions.IsTrue(o, clusterv1.PausedCondition)
		}, "Paused=True")
		eventually(t, vc, func(o capi.Object) bool {
			return conditions.IsFalse(o, clusterv1.PausedCondition)
		}, "the VCOCluster itself not paused")
	})

	t.Run("deleting removes the finalizer through the shared delete path", func(t *testing.T) {
		g := NewWithT(t)
		for _, o := range []capi.Object{tfc, vc, tfmp} {
			g.Expect(c.Delete(ctx, o)).To(Succeed())
			gone(t, o)
		}
	})
}

func finalizerOf(o client.Object) string {
	switch o.(type) {
	case *captfv1.TerraformCluster:
		return captfv1.TerraformClusterFinalizer
	case *captfv1.TerraformMachine:
		return captfv1.TerraformMachineFinalizer
	case *captfv1.TerraformMachinePool:
		return captfv1.TerraformMachinePoolFinalizer
	case *capvcov1.VCOCluster:
		return capvcov1.VCOClusterFinalizer
	case *capvcov1.VCOMachine:
		return capvcov1.VCOMachineFinalizer
	}
	panic("unknown kind")
}

func patchCluster(ctx context.Context, cluster *clusterv1.Cluster, paused bool) error {
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
		return err
	}
	before := cluster.DeepCopy()
	cluster.Spec.Paused = ptr.To(paused)
	return env.Client.Patch(ctx, cluster, client.MergeFrom(before))
}

func eventually(t *testing.T, o capi.Object, ok func(capi.Object) bool, what string) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		return env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o) == nil && ok(o)
	}, 20*time.Second, 100*time.Millisecond).Should(BeTrue(), "%T %s: want %s; conditions %+v",
		o, o.GetName(), what, o.GetConditions())
}

func consistently(t *testing.T, o capi.Object, ok func(capi.Object) bool, what string) {
	t.Helper()
	NewWithT(t).Consistently(func() bool {
		return env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o) == nil && ok(o)
	}, 2*time.Second, 100*time.Millisecond).Should(BeTrue(), "%T %s: want %s", o, o.GetName(), what)
}

func gone(t *testing.T, o client.Object) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o))
	}, 20*time.Second, 100*time.Millisecond).Should(BeTrue(), "%T %s still exists: finalizers %v", o, o.GetName(), o.GetFinalizers())
}
