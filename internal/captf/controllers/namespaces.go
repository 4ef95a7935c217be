package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
)

// namespaces keeps what the manager leaves in namespaces tidy:
//   - in a namespace being deleted, the manager's own RoleBinding (rbac.go) stays, kept from the
//     namespace controller, while CAPTF objects there still clean up; once none is left it is
//     deleted, and the namespace can go;
//   - in a destroy namespace (nsdelete.go), a copy whose object is gone loses its handover
//     finalizer (the object normally releases it itself; this catches a pass that stopped
//     between its cleanup and the release), and a destroy namespace that holds no copy and no
//     state any more is deleted once the namespace it served is gone. A copy that went without
//     destroying leaves its state, and the namespace then stays, with the state, for an operator.
type namespaces struct {
	reader client.Reader // live: copies and states are read from the API server
	client client.Client
	prefix string
	// source, for a manager watching one namespace, is that namespace: only its destroy
	// namespace is this manager's.
	source string
}

// destroyNamespaceRecheck is how often a destroy namespace that still holds something is looked
// at again (its copies' events bring it back sooner).
const destroyNamespaceRecheck = 30 * time.Second

// copyKinds are the kinds a destroy namespace holds copies of, and their finalizers.
var copyKinds = []struct{ kind, finalizer string }{
	{captfv1.KindCluster, clusterKind{}.finalizer()},
	{captfv1.KindMachine, machineKind{}.finalizer()},
	{captfv1.KindMachinePool, machinePoolKind{}.finalizer()},
}

func (d *namespaces) setup(mgr ctrl.Manager) error {
	mine := predicate.NewPredicateFuncs(func(o client.Object) bool { return d.isDestroyNamespace(o) || d.isWatched(o.GetName()) })
	toNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if !d.isWatched(o.GetNamespace()) && (d.prefix == "" || !strings.HasPrefix(o.GetNamespace(), d.prefix)) {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.GetNamespace()}}}
	})
	// A namespace that goes brings its destroy namespace back: that may now be deleted.
	toDestroyNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if d.prefix == "" || !d.isWatched(o.GetName()) {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: DestroyNamespaceName(d.prefix, o.GetUID())}}}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("captf-namespaces").
		For(&corev1.Namespace{}, builder.WithPredicates(mine)).
		Watches(&corev1.Namespace{}, toDestroyNamespace, builder.WithPredicates(leaving)).
		Watches(&captfv1.TerraformCluster{}, toNamespace, builder.WithPredicates(leaving)).
		Watches(&captfv1.TerraformMachine{}, toNamespace, builder.WithPredicates(leaving)).
		Watches(&captfv1.TerraformMachinePool{}, toNamespace, builder.WithPredicates(leaving)).
		Complete(d)
}

// isDestroyNamespace reports a destroy namespace this manager keeps.
func (d *namespaces) isDestroyNamespace(o client.Object) bool {
	return d.prefix != "" && o.GetLabels()[captfv1.DestroyForNamespaceUIDLabel] != "" && strings.HasPrefix(o.GetName(), d.prefix) &&
		(d.source == "" || o.GetAnnotations()[captfv1.DestroyNamespaceForAnnotation] == d.source)
}

// isWatched reports a namespace whose CAPTF objects this manager reconciles.
func (d *namespaces) isWatched(name string) bool { return d.source == "" || name == d.source }

func (d *namespaces) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := &corev1.Namespace{}
	if err := d.reader.Get(ctx, req.NamespacedName, ns); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ns.DeletionTimestamp.IsZero() {
		return d.releaseManagerBinding(ctx, ns)
	}
	if !d.isDestroyNamespace(ns) {
		return ctrl.Result{}, nil
	}
	copies, err := d.releaseCopies(ctx, ns.Name)
	if err != nil || copies > 0 {
		return ctrl.Result{RequeueAfter: destroyNamespaceRecheck}, err
	}
	states := &metav1.PartialObjectMetadataList{}
	states.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := d.reader.List(ctx, states, client.InNamespace(ns.Name), client.MatchingLabels{contract.BackendStateLabel: "true"}); err != nil {
		return ctrl.Result{}, err
	}
	if len(states.Items) > 0 {
		// A copy went without destroying: its state records infrastructure. It stays, and so
		// does the namespace (the object's Deleting condition says what to do).
		return ctrl.Result{}, nil
	}
	gone, err := d.sourceGone(ctx, ns)
	if err != nil || !gone {
		return ctrl.Result{RequeueAfter: destroyNamespaceRecheck}, err
	}
	uid := ns.UID
	if err := d.client.Delete(ctx, ns, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("delete destroy namespace %s: %w", ns.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted the destroy namespace: it holds nothing, and the namespace it served is gone",
		"namespace", ns.Name, "for", ns.Annotations[captfv1.DestroyNamespaceForAnnotation])
	return ctrl.Result{}, nil
}

// releaseManagerBinding deletes the manager's RoleBinding in a namespace being deleted once no
// CAPTF object is left there: until then they still need it to clean up.
func (d *namespaces) releaseManagerBinding(ctx context.Context, ns *corev1.Namespace) (ctrl.Result, error) {
	if !d.isWatched(ns.Name) && !d.isDestroyNamespace(ns) {
		return ctrl.Result{}, nil
	}
	rb := &rbacv1.RoleBinding{}
	if err := d.reader.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: managerBinding}, rb); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if rb.Labels[captfv1.ManagedLabel] != "true" {
		return ctrl.Result{}, nil
	}
	for _, k := range copyKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(captfv1.GroupVersion.WithKind(k.kind + "List"))
		if err := d.reader.List(ctx, list, client.InNamespace(ns.Name), client.Limit(1)); err != nil {
			return ctrl.Result{}, err
		}
		if len(list.Items) > 0 {
			return ctrl.Result{RequeueAfter: destroyNamespaceRecheck}, nil
		}
	}
	uid := rb.UID
	if err := d.client.Delete(ctx, rb, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("delete the manager's RoleBinding in namespace %s: %w", ns.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Released the manager's RoleBinding: no CAPTF object is left in the namespace being deleted", "namespace", ns.Name)
	return ctrl.Result{}, nil
}

// releaseCopies removes the handover finalizer of every copy whose own destroy finished and whose
// object is gone, and returns how many copies remain.
func (d *namespaces) releaseCopies(ctx context.Context, namespace string) (int, error) {
	remaining := 0
	for _, k := range copyKinds {
		kind := k.kind
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(captfv1.GroupVersion.WithKind(kind + "List"))
		if err := d.reader.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return 0, fmt.Errorf("list the %ss of destroy namespace %s: %w", kind, namespace, err)
		}
		for i := range list.Items {
			cp := &list.Items[i]
			cp.SetGroupVersionKind(captfv1.GroupVersion.WithKind(kind))
			remaining++
			if cp.DeletionTimestamp.IsZero() || controllerutil.ContainsFinalizer(cp, k.finalizer) {
				continue
			}
			gone, err := d.originalGone(ctx, kind, cp)
			if err != nil {
				return 0, err
			}
			if gone {
				if err := removeFinalizer(ctx, d.client, cp, captfv1.HandoverFinalizer); err != nil {
					return 0, err
				}
			}
		}
	}
	return remaining, nil
}

// originalGone reports whether the object a copy destroyed for no longer exists (no object of
// that name, or one with another UID).
func (d *namespaces) originalGone(ctx context.Context, kind string, cp *metav1.PartialObjectMetadata) (bool, error) {
	_, ref, _ := strings.Cut(cp.Annotations[captfv1.DestroyForAnnotation], " ")
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		return true, nil
	}
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(captfv1.GroupVersion.WithKind(kind))
	err := d.reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return err == nil && o.UID != types.UID(cp.Labels[captfv1.DestroyForUIDLabel]), err
}

// sourceGone reports whether the namespace a destroy namespace served is gone (none of that name,
// or one with another UID): until then another of its objects may still hand a destroy over.
func (d *namespaces) sourceGone(ctx context.Context, ns *corev1.Namespace) (bool, error) {
	src := &corev1.Namespace{}
	err := d.reader.Get(ctx, client.ObjectKey{Name: ns.Annotations[captfv1.DestroyNamespaceForAnnotation]}, src)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return err == nil && string(src.UID) != ns.Labels[captfv1.DestroyForNamespaceUIDLabel], err
}
