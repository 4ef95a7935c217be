package controllers

import (
	"context"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/patch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/decide"
)

// templateReconciler publishes a VCOMachineTemplate's scale-from-zero capacity as the
// cluster-autoscaler's capacity annotations, and says in CapacityPublished when the GPU is
// left out.
type templateReconciler struct{ client client.Client }

func (r *templateReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&capvcov1.VCOMachineTemplate{}).Named("VCOMachineTemplate").Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *templateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t := &capvcov1.VCOMachineTemplate{}
	if err := r.client.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	helper, err := patch.NewHelper(t, r.client)
	if err != nil {
		return ctrl.Result{}, err
	}
	setTemplateCapacity(t)
	return ctrl.Result{}, helper.Patch(ctx, t, patch.WithOwnedConditions{Conditions: []string{capvcov1.CapacityPublishedCondition}})
}

// setTemplateCapacity is the template's pure setter.
func setTemplateCapacity(t *capvcov1.VCOMachineTemplate) {
	ann, reason, msg := decide.Capacity(t.Spec.Template.Spec)
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	for _, k := range []string{decide.CapacityGPUType, decide.CapacityGPU} {
		if _, ok := ann[k]; !ok {
			delete(t.Annotations, k)
		}
	}
	maps.Copy(t.Annotations, ann)
	status := metav1.ConditionTrue
	if reason != capvcov1.CapacityPublishedReason {
		status = metav1.ConditionFalse
	}
	set(t, capvcov1.CapacityPublishedCondition, status, reason, msg)
}
