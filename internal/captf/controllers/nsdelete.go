package controllers

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/decide"
	"github.com/capx-io/capx/internal/captf/inputs"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/state"
)

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;create

// Deleting a namespace deletes everything in it, and the NamespaceLifecycle admission plugin
// refuses to create anything in it from then on: no destroy Job, run Secret, Lease or Event. So
// the destroy of an object deleted with its namespace runs elsewhere: a copy of the object in
// the manager's destroy namespace (--destroy-namespace), with copies of its state, durable
// inputs and credentials owned by the copy, is deleted there and destroys like any deleted
// object. Once the copy is gone and left no state, the object deletes its own Secrets and lets
// its finalizer go, and the namespace goes. Until then the state, backups, durable inputs and
// credentials stay: the garbage collector and the namespace controller may not delete them
// (config/admission/captf-state-protection.yaml). decide.Next makes every choice; this file
// observes (observeNamespace) and carries out a Relocate decision (relocate).

// observeNamespace (deleting objects whose state records resources) records whether the
// namespace is being deleted and, when a destroy namespace is configured, how far the copy that
// destroys elsewhere has got.
func (r *provider[T]) observeNamespace(ctx context.Context, p *pass[T]) error {
	if p.snap == nil || p.snap.Resources == 0 || p.spec.DeletionPolicy == captfv1.DeletionPolicyRetain {
		return nil
	}
	ns := &corev1.Namespace{}
	if err := r.reader.Get(ctx, client.ObjectKey{Name: p.owner.Namespace}, ns); err != nil {
		return fmt.Errorf("get namespace %s: %w", p.owner.Namespace, err)
	}
	if ns.DeletionTimestamp.IsZero() && ns.Status.Phase != corev1.NamespaceTerminating {
		return nil
	}
	p.terminating = &decide.Terminating{Elsewhere: r.opts.DestroyNamespace != ""}
	if !p.terminating.Elsewhere {
		p.nsMessage = fmt.Sprintf("namespace %s is being deleted, and Kubernetes creates nothing in it any more, so no destroy Job can "+
			"run for the %d resources the state records, and the manager runs with --destroy-namespace=\"\" (no destroy elsewhere). ",
			ns.Name, p.snap.Resources) + r.holdAdvice(p)
		r.namespaceEvent(ns, p, corev1.EventTypeWarning, "InfrastructureHeld", p.nsMessage)
		return nil
	}
	phase, err := r.copyPhase(ctx, p)
	if err != nil {
		return err
	}
	p.terminating.Copy = phase
	p.nsMessage = fmt.Sprintf("namespace %s is being deleted and creates nothing, so the %d resources the state records are destroyed by a copy "+
		"of this object in namespace %s (kubectl get %s %s -n %s); this object goes once the copy has destroyed everything",
		ns.Name, p.snap.Resources, r.opts.DestroyNamespace, kubectlResource(p.owner.Kind), copyName(p.owner), r.opts.DestroyNamespace)
	if phase == decide.CopyLeftState {
		p.nsMessage = fmt.Sprintf("namespace %s is being deleted; the copy %s that destroyed this object's infrastructure in namespace %s "+
			"is gone, but its state still records resources (its finalizer was removed by hand, or it was set to deletionPolicy Retain): "+
			"they are not destroyed. Its state Secrets are kept in %s (kubectl get secrets -n %s -l %s=%s). ",
			ns.Name, copyName(p.owner), r.opts.DestroyNamespace, r.opts.DestroyNamespace, r.opts.DestroyNamespace,
			contract.BackendSuffixLabel, copySuffix(r.opts.DestroyNamespace, p.owner)) + r.holdAdvice(p)
		r.namespaceEvent(ns, p, corev1.EventTypeWarning, "InfrastructureHeld", p.nsMessage)
	}
	return nil
}

// holdAdvice says how to let a held namespace go without destroying, and how to destroy later.
func (r *provider[T]) holdAdvice(p *pass[T]) string {
	return fmt.Sprintf("The state, its backups and the durable inputs are kept, and the namespace stays Terminating, so nothing is leaked. "+
		"To let the namespace go, save CAPTF's Secrets (kubectl get secrets -n %s -l %s=true -o yaml > captf-secrets.yaml) and set "+
		"deletionPolicy Retain (kubectl patch %s %s -n %s --type merge -p '{\"spec\":{\"deletionPolicy\":\"Retain\"}}'); the namespace "+
		"deletion then deletes them. To destroy the infrastructure afterwards, restore them into the re-created namespace with the "+
		"object and delete it again (docs/captf/deletion.md, Deleting the namespace)",
		p.owner.Namespace, captfv1.ManagedLabel, kubectlResource(p.owner.Kind), p.owner.Name, p.owner.Namespace)
}

// namespaceEvent records an Event on the Namespace: one in the object's namespace would be
// refused like everything else, and the Namespace's Events (kubectl describe namespace) are
// where the person deleting it looks.
func (r *provider[T]) namespaceEvent(ns *corev1.Namespace, p *pass[T], typ, reason, msg string) {
	r.recorder.Eventf(ns, typ, reason, "%s %s: %s", p.owner.Kind, p.owner.Name, msg)
}

// copyPhase finds the object's copy in the destroy namespace.
func (r *provider[T]) copyPhase(ctx context.Context, p *pass[T]) (decide.CopyPhase, error) {
	dest := r.opts.DestroyNamespace
	cp := p.scope.Object.DeepCopyObject().(T)
	err := r.reader.Get(ctx, client.ObjectKey{Namespace: dest, Name: copyName(p.owner)}, cp)
	switch {
	case err == nil:
		if uid := cp.GetLabels()[captfv1.DestroyForUIDLabel]; uid != string(p.owner.UID) {
			return 0, fmt.Errorf("namespace %s holds a %s %s that is not this object's copy (label %s=%q): "+
				"rename or delete it so the destroy can be handed over", dest, p.owner.Kind, cp.GetName(), captfv1.DestroyForUIDLabel, uid)
		}
		p.destroyCopy = cp
		if cp.GetDeletionTimestamp().IsZero() || hasPausedAnnotation(cp) {
			return decide.CopyPending, nil
		}
		return decide.CopyDestroying, nil
	case !apierrors.IsNotFound(err):
		return 0, fmt.Errorf("get the copy %s/%s: %w", dest, copyName(p.owner), err)
	case p.scope.Object.GetAnnotations()[captfv1.DestroyedElsewhereAnnotation] == "":
		return decide.CopyNone, nil
	}
	// Handed over, and the copy is gone: it went through its finalizer, which deletes its state
	// after a destroy left nothing; a state left behind means it went without destroying.
	snap, err := state.Read(ctx, r.reader, dest, copySuffix(dest, p.owner))
	switch {
	case err == nil && snap.Resources == 0, state.Reason(err) == captfv1.StateNotFoundReason:
		return decide.CopyDone, nil
	case err == nil, state.Reason(err) != "":
		return decide.CopyLeftState, nil
	}
	return 0, err
}

// relocate hands the destroy to a copy of the object in the destroy namespace, one idempotent
// step after the other (a pass that stops half-way is finished by the next): the namespace, the
// copy (created paused, with the finalizer, so nothing runs on it yet), the Secrets it destroys
// with (owned by it), the record of the hand-over on the object, the copy's deletion, and last
// its unpausing, which starts its destroy.
func (r *provider[T]) relocate(ctx context.Context, p *pass[T]) error {
	dest := r.opts.DestroyNamespace
	if err := r.ensureDestroyNamespace(ctx, dest); err != nil {
		return err
	}
	cp := p.destroyCopy
	if cp == nil {
		cp = r.newCopy(p)
		if err := r.client.Create(ctx, cp); apierrors.IsAlreadyExists(err) {
			if err := r.reader.Get(ctx, client.ObjectKeyFromObject(cp), cp); err != nil {
				return err
			}
		} else if err != nil {
			return fmt.Errorf("create the copy %s/%s that destroys elsewhere: %w", dest, cp.GetName(), err)
		}
	}
	if err := r.copySecrets(ctx, p, cp); err != nil {
		return err
	}
	record := dest + "/" + cp.GetName() + " " + string(cp.GetUID())
	if p.scope.Object.GetAnnotations()[captfv1.DestroyedElsewhereAnnotation] != record {
		// A copy is patched: the answer must not overwrite what this pass observed.
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, captfv1.DestroyedElsewhereAnnotation, record)
		if err := r.client.Patch(ctx, p.scope.Object.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("record the destroy elsewhere on the object: %w", err)
		}
	}
	if cp.GetDeletionTimestamp().IsZero() {
		if err := r.client.Delete(ctx, cp); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete the copy %s/%s: %w", dest, cp.GetName(), err)
		}
	}
	if hasPausedAnnotation(cp) {
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, clusterv1.PausedAnnotation)
		if err := r.client.Patch(ctx, cp, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("unpause the copy %s/%s: %w", dest, cp.GetName(), err)
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.owner.Namespace}}
	r.namespaceEvent(ns, p, corev1.EventTypeNormal, "DestroyingElsewhere", p.nsMessage) // observeNamespace's, naming the copy
	r.recorder.Event(cp, corev1.EventTypeNormal, "DestroyingElsewhere", "Destroying for "+cp.GetAnnotations()[captfv1.DestroyForAnnotation])
	ctrl.LoggerFrom(ctx).Info("Handed the destroy to a copy in the destroy namespace", "copy", klog.KRef(dest, cp.GetName()))
	return nil
}

// ensureDestroyNamespace creates the destroy namespace when it does not exist.
func (r *provider[T]) ensureDestroyNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{}
	err := r.reader.Get(ctx, client.ObjectKey{Name: name}, ns)
	switch {
	case apierrors.IsNotFound(err):
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{captfv1.ManagedLabel: "true"}}}
		if err := r.client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create the destroy namespace %s: %w", name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("get the destroy namespace %s: %w", name, err)
	case !ns.DeletionTimestamp.IsZero():
		return fmt.Errorf("the destroy namespace %s (--destroy-namespace) is being deleted itself; the destroy is handed over once it is gone", name)
	}
	return nil
}

// newCopy is the copy of the object that destroys in the destroy namespace: the same spec, with
// the credentials and the Jobs policy it resolved (a machine's or pool's may come from its
// TerraformCluster, which stays behind), deletionPolicy Delete, the finalizer, and paused until
// relocate hands it over. It keeps no owner (it has no Cluster there) and no label but the
// watch filter's.
func (r *provider[T]) newCopy(p *pass[T]) T {
	cp := p.scope.Object.DeepCopyObject().(T)
	resetMeta(cp, r.opts.DestroyNamespace, copyName(p.owner))
	cp.SetFinalizers([]string{r.kind.finalizer()})
	labels := map[string]string{captfv1.DestroyForUIDLabel: string(p.owner.UID)}
	if v, ok := p.scope.Object.GetLabels()[clusterv1.WatchLabel]; ok {
		labels[clusterv1.WatchLabel] = v
	}
	cp.SetLabels(labels)
	cp.SetAnnotations(map[string]string{
		clusterv1.PausedAnnotation:   "",
		captfv1.DestroyForAnnotation: p.owner.Kind + " " + p.owner.Namespace + "/" + p.owner.Name,
	})
	spec, status, init := r.kind.workspace(cp)
	*status, *init = captfv1.WorkspaceStatus{}, captfv1.InitializationStatus{}
	spec.DeletionPolicy = captfv1.DeletionPolicyDestroy
	spec.CredentialsRef = nil
	if creds := r.credentialsSecret(p); creds != "" {
		spec.CredentialsRef = &corev1.LocalObjectReference{Name: copiedName(p.owner, creds)}
	}
	spec.Jobs = p.policy.Spec()
	spec.Jobs.ServiceAccountName = "" // a ServiceAccount of its own stays behind: the runner's is made there
	rename := func(name string) string { return copiedName(p.owner, name) }
	jobs.RenameReferences(spec.Jobs, rename, rename)
	return cp
}

// copySecrets gives the copy what its destroy needs, owned by it: the state, the durable
// inputs, and what its Jobs read (the credentials, image pull Secrets, env sources).
func (r *provider[T]) copySecrets(ctx context.Context, p *pass[T], cp client.Object) error {
	dest := r.opts.DestroyNamespace
	to, err := jobs.OwnerOf(cp, "")
	if err != nil {
		return err
	}
	ref, err := state.OwnerReference(cp, r.client.Scheme())
	if err != nil {
		return err
	}
	if _, err := state.Copy(ctx, r.client, r.reader, p.owner.Namespace, p.owner.StateSuffix(), dest, to.StateSuffix(), to.MoveLabels(), ref); err != nil {
		return err
	}
	inputsSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.owner.Namespace}}
	if err := r.copyObject(ctx, inputsSecret, inputs.SecretName(p.owner), inputs.SecretName(to), to.MoveLabels(), ref, true); err != nil {
		return err
	}
	// What the Jobs read: a missing one is not copied (the copy reports CredentialsNotFound, or
	// its Pod waits, for the name it expects in the destroy namespace, where it can be created).
	reads := readsOf(r.credentialsSecret(p), p.policy)
	for _, name := range reads.secrets {
		src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.owner.Namespace}}
		if err := r.copyObject(ctx, src, name, copiedName(p.owner, name), to.Labels(), ref, false); err != nil {
			return err
		}
	}
	for _, name := range reads.configMaps {
		src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.owner.Namespace}}
		if err := r.copyObject(ctx, src, name, copiedName(p.owner, name), to.Labels(), ref, false); err != nil {
			return err
		}
	}
	return nil
}

// copyObject copies a Secret or ConfigMap of the object's namespace (src is filled in) under a
// new name in the destroy namespace, owned by owner, with labels and, with keepAnnotations, its
// annotations. A missing source is not copied; an existing copy is kept.
func (r *provider[T]) copyObject(ctx context.Context, src client.Object, name, toName string, labels map[string]string, owner metav1.OwnerReference, keepAnnotations bool) error {
	ns := src.GetNamespace()
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, src); err != nil {
		return client.IgnoreNotFound(err)
	}
	dst := src.DeepCopyObject().(client.Object)
	resetMeta(dst, r.opts.DestroyNamespace, toName)
	dst.SetLabels(labels)
	dst.SetOwnerReferences([]metav1.OwnerReference{owner})
	if !keepAnnotations {
		dst.SetAnnotations(nil)
	}
	if err := r.client.Create(ctx, dst); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("copy %s/%s to %s/%s: %w", ns, name, dst.GetNamespace(), toName, err)
	}
	return nil
}

// resetMeta makes obj a new object named name in namespace: what the API server set on the
// original goes.
func resetMeta(obj client.Object, namespace, name string) {
	obj.SetNamespace(namespace)
	obj.SetName(name)
	obj.SetUID("")
	obj.SetResourceVersion("")
	obj.SetGeneration(0)
	obj.SetCreationTimestamp(metav1.Time{})
	obj.SetDeletionTimestamp(nil)
	obj.SetDeletionGracePeriodSeconds(nil)
	obj.SetManagedFields(nil)
	obj.SetOwnerReferences(nil)
	obj.SetFinalizers(nil)
}

// copyName is the name of the object's copy in the destroy namespace: its name and the start of
// its UID, so that objects of the same name from different namespaces do not meet there.
func copyName(o jobs.Owner) string {
	return inputs.BoundedName(o.Name + "-" + strings.ReplaceAll(string(o.UID), "-", "")[:8])
}

// copySuffix is the state suffix of the object's copy.
func copySuffix(dest string, o jobs.Owner) string {
	return contract.StateSuffix(dest, o.Kind, copyName(o))
}

// copiedName is the name, in the destroy namespace, of the copy of a Secret or ConfigMap the
// object's Jobs read (credentials, image pull Secrets, env sources).
func copiedName(o jobs.Owner, name string) string {
	return inputs.BoundedName("captf-copy-" + contract.KindShort(o.Kind) + "-" + copyName(o) + "-" + name)
}

func hasPausedAnnotation(o client.Object) bool {
	_, ok := o.GetAnnotations()[clusterv1.PausedAnnotation]
	return ok
}

// toOriginal maps a copy in the destroy namespace to the object it destroys for, so the
// object learns at once that its copy is gone.
func toOriginal(kind string) func(context.Context, client.Object) []reconcile.Request {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		k, ref, ok := strings.Cut(o.GetAnnotations()[captfv1.DestroyForAnnotation], " ")
		ns, name, ok2 := strings.Cut(ref, "/")
		if !ok || !ok2 || k != kind {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}}
	}
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

// The copies that destroy elsewhere are created and deleted by the manager.
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters;terraformmachines;terraformmachinepools,verbs=create;delete
