package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
)

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get

// holdInTerminatingNamespace holds the deletion of an object whose namespace is being deleted
// while its state still records resources. The NamespaceLifecycle admission plugin refuses to
// create anything in a terminating namespace (the destroy Job, its run Secret, its leases, even
// Events), so no destroy can run there; letting the finalizer go would leak the infrastructure.
// The state, its backups and the durable inputs stay (the garbage collector and the namespace
// controller may not delete them: config/admission/captf-state-protection.yaml), and so does
// the namespace, until the object is set to deletionPolicy Retain. The hold reads as an
// unreadable state (StateReadable=False/NamespaceTerminating): nothing runs on it.
func (r *provider[T]) holdInTerminatingNamespace(ctx context.Context, p *pass[T]) error {
	if p.scope.Object.GetDeletionTimestamp().IsZero() || p.snap == nil || p.snap.Resources == 0 ||
		p.spec.DeletionPolicy == captfv1.DeletionPolicyRetain {
		return nil
	}
	ns := &corev1.Namespace{}
	if err := r.reader.Get(ctx, client.ObjectKey{Name: p.owner.Namespace}, ns); err != nil {
		return fmt.Errorf("get namespace %s: %w", p.owner.Namespace, err)
	}
	if ns.DeletionTimestamp.IsZero() && ns.Status.Phase != corev1.NamespaceTerminating {
		return nil
	}
	hold := &namespaceTerminatingError{namespace: ns.Name, kind: p.owner.Kind, name: p.owner.Name, resources: p.snap.Resources}
	p.stateErr, p.snap = hold, nil
	// An Event in the object's namespace would be refused like everything else; the Namespace's
	// own Events (kubectl describe namespace) are where the person deleting it looks.
	r.recorder.Eventf(ns, corev1.EventTypeWarning, "InfrastructureHeld", "%s %s: %s", p.owner.Kind, p.owner.Name, hold.Error())
	ctrl.LoggerFrom(ctx).Info("Holding a deletion in a terminating namespace", "resources", hold.resources)
	return nil
}

// namespaceTerminatingError is the hold of holdInTerminatingNamespace; its text says what to do.
type namespaceTerminatingError struct {
	namespace, kind, name string
	resources             int
}

func (e *namespaceTerminatingError) Error() string {
	return fmt.Sprintf("namespace %s is being deleted, and Kubernetes creates nothing in it any more, so no destroy Job can run "+
		"for the %d resources the state records. The state, its backups and the durable inputs are kept, and the namespace "+
		"stays Terminating, so nothing is leaked. To let the namespace go, save CAPTF's Secrets "+
		"(kubectl get secrets -n %s -l %s=true -o yaml > captf-secrets.yaml) and set deletionPolicy Retain "+
		"(kubectl patch %s %s -n %s --type merge -p '{\"spec\":{\"deletionPolicy\":\"Retain\"}}'); the namespace deletion "+
		"then deletes them. To destroy the infrastructure afterwards, restore them into the re-created namespace with the "+
		"object and delete it again (docs/captf/deletion.md, Deleting the namespace)",
		e.namespace, e.resources, e.namespace, captfv1.ManagedLabel, kubectlResource(e.kind), e.name, e.namespace)
}

// kubectlResource is the resource name kubectl takes for a CAPTF kind.
func kubectlResource(kind string) string {
	switch kind {
	case contract.KindCluster:
		return "terraformcluster"
	case contract.KindMachine:
		return "terraformmachine"
	}
	return "terraformmachinepool"
}
