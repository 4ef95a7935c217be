package controllers

import (
	"context"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/patch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/capvco/gpuaddon"
)

// templateReconciler publishes a VCOMachineTemplate's scale-from-zero capacity as the
// cluster-autoscaler's capacity annotations, and says in CapacityPublished when the GPU is
// left out.
type templateReconciler struct{ client client.Client }

func (r *templateReconciler) setup(mgr ctrl.Manager) error {
	// A Cluster's pause transitions bring its templates back (those it names in their
	// cluster-name label).
	return ctrl.NewControllerManagedBy(mgr).For(&capvcov1.VCOMachineTemplate{}).Named("VCOMachineTemplate").
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(clusterToTemplates(r.client))).
		// A changed spec.addons.gpu changes what the cluster's GPU templates publish.
		Watches(&capvcov1.VCOCluster{}, handler.EnqueueRequestsFromMapFunc(vcoClusterToTemplates(r.client))).
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *templateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t := &capvcov1.VCOMachineTemplate{}
	if err := r.client.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if paused, err := r.paused(ctx, t); paused || err != nil {
		// A paused object is never changed (clusterctl move copies it meanwhile); the end of
		// the pause brings the template back (its annotation's removal, or the Cluster's watch).
		ctrl.LoggerFrom(ctx).V(4).Info("Paused: the template is left as it is")
		return ctrl.Result{}, err
	}
	helper, err := patch.NewHelper(t, r.client)
	if err != nil {
		return ctrl.Result{}, err
	}
	addon, err := r.gpuAddon(ctx, t)
	if err != nil {
		return ctrl.Result{}, err
	}
	setTemplateCapacity(t, addon)
	return ctrl.Result{}, helper.Patch(ctx, t, patch.WithOwnedConditions{Conditions: []string{capvcov1.CapacityPublishedCondition}})
}

// paused: the template has the paused annotation, or the Cluster its cluster-name label names
// is paused.
func (r *templateReconciler) paused(ctx context.Context, t *capvcov1.VCOMachineTemplate) (bool, error) {
	var cluster *clusterv1.Cluster
	if name := t.Labels[clusterv1.ClusterNameLabel]; name != "" {
		c := &clusterv1.Cluster{}
		switch err := r.client.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: name}, c); {
		case err == nil:
			cluster = c
		case !apierrors.IsNotFound(err):
			return false, err
		}
	}
	if cluster == nil {
		return annotations.HasPaused(t), nil
	}
	return annotations.IsPaused(cluster, t), nil
}

// gpuAddon is the GPU add-on of the cluster the template's cluster-name label names (its
// VCOCluster's spec.addons.gpu). A template not labelled with a cluster, or whose cluster or
// VCOCluster does not exist (yet), counts as gpuaddon.NVIDIA, the add-on's default.
func (r *templateReconciler) gpuAddon(ctx context.Context, t *capvcov1.VCOMachineTemplate) (gpuaddon.Addon, error) {
	name := t.Labels[clusterv1.ClusterNameLabel]
	if name == "" {
		return gpuaddon.NVIDIA, nil
	}
	c := &clusterv1.Cluster{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: name}, c); err != nil {
		return gpuaddon.NVIDIA, client.IgnoreNotFound(err)
	}
	ref := c.Spec.InfrastructureRef
	if ref.Kind != "VCOCluster" || ref.Name == "" {
		return gpuaddon.NVIDIA, nil
	}
	vc := &capvcov1.VCOCluster{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: ref.Name}, vc); err != nil {
		return gpuaddon.NVIDIA, client.IgnoreNotFound(err)
	}
	a, err := gpuaddon.Of(vc.Spec)
	if err != nil {
		return gpuaddon.None, nil // the CRD's enum refuses it; what is not nvidia advertises nothing
	}
	return a, nil
}

// setTemplateCapacity is the template's pure setter, for a cluster whose GPU add-on is addon.
func setTemplateCapacity(t *capvcov1.VCOMachineTemplate, addon gpuaddon.Addon) {
	ann, reason, msg := decide.Capacity(t.Spec.Template.Spec, addon)
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	for _, k := range []string{decide.CapacityGPUType, decide.CapacityGPU} {
		if _, ok := ann[k]; !ok {
			delete(t.Annotations, k)
		}
	}
	maps.Copy(t.Annotations, ann)
	t.Status.Capacity = decide.CapacityResources(t.Spec.Template.Spec, addon)
	t.Status.NodeInfo = capvcov1.NodeInfo{Architecture: "amd64", OperatingSystem: "linux"}
	status := metav1.ConditionTrue
	if reason != capvcov1.CapacityPublishedReason {
		status = metav1.ConditionFalse
	}
	set(t, capvcov1.CapacityPublishedCondition, status, reason, msg)
}
