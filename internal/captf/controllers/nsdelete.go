package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/decide"
	"github.com/capx-io/capx/internal/captf/inputs"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/state"
)

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;delete

// Deleting a namespace deletes everything in it, and the NamespaceLifecycle admission plugin
// refuses to create anything in it from then on: no destroy Job, run Secret, Lease or Event. So
// the destroy of an object deleted with its namespace runs elsewhere: a copy of the object in
// that namespace's own destroy namespace (<--destroy-namespace-prefix><namespace UID>), with
// copies of its state, durable inputs and credentials owned by the copy, is deleted there and
// destroys like any deleted object. Each namespace being deleted gets a destroy namespace of its
// own, with its own runner account and lock Role, so a module running there sees exactly what it
// saw in its own namespace and nothing of another tenant's. The copy keeps the handover
// finalizer after its destroy: the copy itself, which only the manager writes, is the proof that
// the destroy ran (nothing on the object, which the tenant can edit, is). Once the object has
// seen it, it deletes its own Secrets, releases the copy and lets its finalizer go, and the
// namespace goes; the destroy namespace goes once it holds nothing (destroyns.go). Until then the
// state, backups, durable inputs and credentials stay: the garbage collector and the namespace
// controller may not delete them (config/admission/captf-state-protection.yaml). decide.Next
// makes every choice; this file observes (observeNamespace) and carries out a Relocate decision
// (relocate).

// DestroyNamespaceName is the destroy namespace of the namespace with this UID.
func DestroyNamespaceName(prefix string, uid types.UID) string { return prefix + string(uid) }

// observeNamespace (deleting objects whose state records resources) records whether the
// namespace is being deleted and, when destroys elsewhere are on, how far the copy that destroys
// elsewhere has got.
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
	p.terminating = &decide.Terminating{Elsewhere: r.opts.DestroyNamespacePrefix != ""}
	if !p.terminating.Elsewhere {
		// No Event: nothing can be recorded in the namespace, and an Event on the Namespace
		// would land in "default", for readers of another namespace to see.
		p.nsMessage = fmt.Sprintf("namespace %s is being deleted, and Kubernetes creates nothing in it any more, so no destroy Job can "+
			"run for the %d resources the state records, and the manager runs with --destroy-namespace-prefix=\"\" (no destroy elsewhere). ",
			ns.Name, p.snap.Resources) + r.holdAdvice(p)
		return nil
	}
	p.destroyNamespace = DestroyNamespaceName(r.opts.DestroyNamespacePrefix, ns.UID)
	phase, err := r.copyPhase(ctx, p)
	if err != nil {
		return err
	}
	p.terminating.Copy = phase
	dest := p.destroyNamespace
	p.nsMessage = fmt.Sprintf("namespace %s is being deleted and creates nothing, so the %d resources the state records are destroyed by a copy "+
		"of this object in namespace %s, which holds this namespace's copies only (kubectl get %s %s -n %s; its Events: kubectl get events -n %s); "+
		"this object goes once the copy has destroyed everything",
		ns.Name, p.snap.Resources, dest, kubectlResource(p.owner.Kind), copyName(p.owner), dest, dest)
	if phase == decide.CopyLeftState {
		p.nsMessage = fmt.Sprintf("namespace %s is being deleted; the copy %s that destroyed this object's infrastructure in namespace %s "+
			"went without destroying (its finalizer was removed by hand, or it was set to deletionPolicy Retain), and its state still "+
			"records resources: they are not destroyed. Its state Secrets are kept in %s (kubectl get secrets -n %s -l %s=%s). ",
			ns.Name, copyName(p.owner), dest, dest, dest, contract.BackendSuffixLabel, copySuffix(dest, p.owner)) + r.holdAdvice(p)
		r.destroyNamespaceEvent(dest, corev1.EventTypeWarning, "InfrastructureHeld", p)
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

// destroyNamespaceEvent records an Event about the object in its destroy namespace: its own
// namespace refuses new Events, an Event on the Namespace object would go to "default" (where
// other tenants read), and the destroy namespace holds this namespace's copies only.
func (r *provider[T]) destroyNamespaceEvent(dest, typ, reason string, p *pass[T]) {
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: dest, Namespace: dest}
	r.recorder.Eventf(ref, typ, reason, "%s %s/%s: %s", p.owner.Kind, p.owner.Namespace, p.owner.Name, p.nsMessage)
}

// copyPhase finds the object's copy in its destroy namespace. Only the copy and its state, both
// written there by the manager alone, say how far the destroy got.
func (r *provider[T]) copyPhase(ctx context.Context, p *pass[T]) (decide.CopyPhase, error) {
	dest := p.destroyNamespace
	cp := p.scope.Object.DeepCopyObject().(T)
	err := r.reader.Get(ctx, client.ObjectKey{Namespace: dest, Name: copyName(p.owner)}, cp)
	switch {
	case err == nil:
		if uid := cp.GetLabels()[captfv1.DestroyForUIDLabel]; uid != string(p.owner.UID) {
			return 0, fmt.Errorf("namespace %s holds a %s %s that is not this object's copy (label %s=%q): "+
				"rename or delete it so the destroy can be handed over", dest, p.owner.Kind, cp.GetName(), captfv1.DestroyForUIDLabel, uid)
		}
		p.destroyCopy = cp
		switch {
		case cp.GetDeletionTimestamp().IsZero() || hasPausedAnnotation(cp):
			return decide.CopyPending, nil
		case controllerutil.ContainsFinalizer(cp, r.kind.finalizer()):
			return decide.CopyDestroying, nil
		}
		// The copy's own finalizer went: after its destroy it deleted its state; a state left
		// behind means its finalizer was removed without a destroy.
	case !apierrors.IsNotFound(err):
		return 0, fmt.Errorf("get the copy %s/%s: %w", dest, copyName(p.owner), err)
	}
	snap, err := state.Read(ctx, r.reader, dest, copySuffix(dest, p.owner))
	switch {
	case err == nil && snap.Resources == 0, state.Reason(err) == captfv1.StateNotFoundReason:
		if p.destroyCopy == nil {
			// No copy, no copy's state: none was made yet, or it was removed by hand before
			// anything was destroyed. Either way the destroy is (again) handed over.
			return decide.CopyNone, nil
		}
		return decide.CopyDone, nil
	case err == nil, state.Reason(err) != "":
		return decide.CopyLeftState, nil
	}
	return 0, err
}

// relocate hands the destroy to a copy of the object in its destroy namespace, one idempotent
// step after the other (a pass that stops half-way is finished by the next): the namespace, the
// copy (created paused, with its finalizer and the handover finalizer, so nothing runs on it
// yet), the Secrets it destroys with (owned by it, exactly the source's), the copy's deletion,
// and last its unpausing, which starts its destroy.
func (r *provider[T]) relocate(ctx context.Context, p *pass[T]) error {
	dest := p.destroyNamespace
	if err := r.ensureDestroyNamespace(ctx, dest, p.owner.Namespace); err != nil {
		return err
	}
	// The manager writes in a namespace only through the RoleBinding it keeps there.
	if err := keepManagerBinding(ctx, r.client, r.reader, dest, r.opts.Identity); err != nil {
		return err
	}
	cp := p.destroyCopy
	if cp == nil {
		cp = r.newCopy(p)
		if err := r.client.Create(ctx, cp); apierrors.IsAlreadyExists(err) {
			if err := r.reader.Get(ctx, client.ObjectKeyFromObject(cp), cp); err != nil {
				return err
			}
			if uid := cp.GetLabels()[captfv1.DestroyForUIDLabel]; uid != string(p.owner.UID) {
				return fmt.Errorf("namespace %s holds a %s %s that is not this object's copy (label %s=%q)", dest, p.owner.Kind, cp.GetName(), captfv1.DestroyForUIDLabel, uid)
			}
		} else if err != nil {
			return fmt.Errorf("create the copy %s/%s that destroys elsewhere: %w", dest, cp.GetName(), err)
		}
	}
	if err := r.copySecrets(ctx, p, cp); err != nil {
		return err
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
	r.recorder.Event(cp, corev1.EventTypeNormal, "DestroyingElsewhere", "Destroying for "+cp.GetAnnotations()[captfv1.DestroyForAnnotation]+
		": namespace "+p.owner.Namespace+" is being deleted and creates nothing")
	ctrl.LoggerFrom(ctx).Info("Handed the destroy to a copy in the namespace's destroy namespace", "copy", klog.KRef(dest, cp.GetName()))
	return nil
}

// releaseCopy removes the handover finalizer of the object's copy, once the object is cleaned up
// after the copy's destroy; the copy goes, and the Secrets it owns with it.
func (r *provider[T]) releaseCopy(ctx context.Context, p *pass[T]) error {
	if p.destroyCopy == nil || p.terminating == nil || p.terminating.Copy != decide.CopyDone {
		return nil
	}
	return removeFinalizer(ctx, r.client, p.destroyCopy, captfv1.HandoverFinalizer)
}

// removeFinalizer removes one finalizer of a copy in a destroy namespace, where nobody but the
// manager adds any.
func removeFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) error {
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	before := obj.DeepCopyObject().(client.Object)
	controllerutil.RemoveFinalizer(obj, finalizer)
	err := c.Patch(ctx, obj, client.MergeFrom(before))
	if err = client.IgnoreNotFound(err); err != nil {
		return fmt.Errorf("remove finalizer %s from %s/%s: %w", finalizer, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// ensureDestroyNamespace creates the destroy namespace of namespace source when it does not exist,
// and otherwise checks that it is one: the manager's marks (it was made by this manager for this
// namespace) and no RoleBinding the manager did not make (nobody was given rights in it). A
// namespace of that name made by anyone else is refused, with nothing copied into it.
func (r *provider[T]) ensureDestroyNamespace(ctx context.Context, name, source string) error {
	ns := &corev1.Namespace{}
	err := r.reader.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		ns = r.newDestroyNamespace(name, source)
		if err = r.client.Create(ctx, ns); apierrors.IsAlreadyExists(err) {
			err = r.reader.Get(ctx, client.ObjectKey{Name: name}, ns)
		} else if err == nil {
			ctrl.LoggerFrom(ctx).Info("Created the destroy namespace", "namespace", name, "for", source)
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("destroy namespace %s: %w", name, err)
	}
	if !ns.DeletionTimestamp.IsZero() {
		return fmt.Errorf("the destroy namespace %s is being deleted itself; the destroy is handed over once it is gone", name)
	}
	want := r.newDestroyNamespace(name, source)
	for k, v := range want.Labels {
		if ns.Labels[k] != v {
			return fmt.Errorf("namespace %s exists but was not made by this manager as the destroy namespace of %s (label %s is %q, not %q): "+
				"nothing is copied into it; delete it (kubectl delete namespace %s) so the manager can make its own", name, source, k, ns.Labels[k], v, name)
		}
	}
	for k, v := range want.Annotations {
		if ns.Annotations[k] != v {
			return fmt.Errorf("namespace %s exists but was not made by this manager as the destroy namespace of %s (annotation %s is %q, not %q): "+
				"nothing is copied into it; delete it (kubectl delete namespace %s) so the manager can make its own", name, source, k, ns.Annotations[k], v, name)
		}
	}
	return r.checkDestroyBindings(ctx, name)
}

func (r *provider[T]) newDestroyNamespace(name, source string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name,
		Labels: map[string]string{
			captfv1.ManagedLabel:                "true",
			captfv1.DestroyForNamespaceUIDLabel: strings.TrimPrefix(name, r.opts.DestroyNamespacePrefix),
		},
		Annotations: map[string]string{captfv1.DestroyNamespaceForAnnotation: source, captfv1.CreatedByAnnotation: r.opts.Identity},
	}}
}

// checkDestroyBindings refuses a destroy namespace with a RoleBinding the manager does not keep
// there: it would give someone other than the copies' runner the copies' Secrets.
func (r *provider[T]) checkDestroyBindings(ctx context.Context, name string) error {
	list := &rbacv1.RoleBindingList{}
	if err := r.reader.List(ctx, list, client.InNamespace(name)); err != nil {
		return fmt.Errorf("list the RoleBindings of destroy namespace %s: %w", name, err)
	}
	for _, rb := range list.Items {
		if !r.managedBinding(&rb) {
			return fmt.Errorf("destroy namespace %s has a RoleBinding the manager did not make (%s, to %s %s): nothing more is copied into it "+
				"until it is deleted (kubectl delete rolebinding %s -n %s)", name, rb.Name, rb.RoleRef.Kind, rb.RoleRef.Name, rb.Name, name)
		}
	}
	return nil
}

// managedBinding is a RoleBinding the manager keeps in a namespace: its own (to
// capx-captf-namespace, for its identity alone), and the runner's and the state locks' (bound to
// accounts of that namespace only).
func (r *provider[T]) managedBinding(rb *rbacv1.RoleBinding) bool {
	if rb.Labels[captfv1.ManagedLabel] != "true" {
		return false
	}
	if rb.Name == managerBinding {
		return rb.RoleRef.Kind == "ClusterRole" && rb.RoleRef.Name == namespaceClusterRole &&
			slices.Equal(rb.Subjects, []rbacv1.Subject{identitySubject(r.opts.Identity)})
	}
	if rb.Name != runnerServiceAccount && rb.Name != runnerLocks {
		return false
	}
	for _, s := range rb.Subjects {
		if s.Kind != rbacv1.ServiceAccountKind || s.Namespace != rb.Namespace {
			return false
		}
	}
	return true
}

// newCopy is the copy of the object that destroys in the destroy namespace: the same spec, with
// the credentials and the Jobs policy it resolved (a machine's or pool's may come from its
// TerraformCluster, which stays behind), deletionPolicy Delete, its finalizer and the handover
// finalizer, and paused until relocate hands it over. It keeps no owner (it has no Cluster there)
// and no label but the watch filter's.
func (r *provider[T]) newCopy(p *pass[T]) T {
	cp := p.scope.Object.DeepCopyObject().(T)
	resetMeta(cp, p.destroyNamespace, copyName(p.owner))
	cp.SetFinalizers([]string{r.kind.finalizer(), captfv1.HandoverFinalizer})
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
	dest := p.destroyNamespace
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
	if err := r.copySecret(ctx, p, inputs.SecretName(p.owner), inputs.SecretName(to), to.MoveLabels(), ref, true); err != nil {
		return err
	}
	// What the Jobs read: a missing one is not copied (the copy reports CredentialsNotFound, or
	// its Pod waits, for the name it expects in the destroy namespace, where it can be created).
	reads := readsOf(r.credentialsSecret(p), p.policy)
	for _, name := range reads.secrets {
		if err := r.copySecret(ctx, p, name, copiedName(p.owner, name), to.Labels(), ref, false); err != nil {
			return err
		}
	}
	for _, name := range reads.configMaps {
		if err := r.copyConfigMap(ctx, p, name, copiedName(p.owner, name), to.Labels(), ref); err != nil {
			return err
		}
	}
	return nil
}

// copySecret copies a Secret of the object's namespace under a new name into the destroy
// namespace, owned by owner, with labels and, with keepAnnotations, its annotations. A missing
// source is not copied; whatever holds the name there already is replaced unless it is exactly
// this copy (state.CreateExact).
func (r *provider[T]) copySecret(ctx context.Context, p *pass[T], name, toName string, labels map[string]string, owner metav1.OwnerReference, keepAnnotations bool) error {
	src := &corev1.Secret{}
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: p.owner.Namespace, Name: name}, src); err != nil {
		return client.IgnoreNotFound(err)
	}
	dst := r.copyMeta(src, p.destroyNamespace, toName, labels, owner, keepAnnotations).(*corev1.Secret)
	if err := state.CreateExact(ctx, r.client, r.reader, dst); err != nil {
		return fmt.Errorf("copy Secret %s/%s to %s/%s: %w", p.owner.Namespace, name, dst.Namespace, toName, err)
	}
	return nil
}

// copyConfigMap is copySecret for a ConfigMap an env of the Jobs reads.
func (r *provider[T]) copyConfigMap(ctx context.Context, p *pass[T], name, toName string, labels map[string]string, owner metav1.OwnerReference) error {
	src := &corev1.ConfigMap{}
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: p.owner.Namespace, Name: name}, src); err != nil {
		return client.IgnoreNotFound(err)
	}
	dst := r.copyMeta(src, p.destroyNamespace, toName, labels, owner, false).(*corev1.ConfigMap)
	err := r.client.Create(ctx, dst.DeepCopy())
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	have := &corev1.ConfigMap{}
	if err := r.reader.Get(ctx, client.ObjectKeyFromObject(dst), have); err != nil {
		return err
	}
	if len(have.OwnerReferences) == 1 && have.OwnerReferences[0].UID == owner.UID && equalStrings(have.Data, dst.Data) && equalBytes(have.BinaryData, dst.BinaryData) {
		return nil
	}
	if err := r.client.Delete(ctx, have, client.Preconditions{UID: &have.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("replace ConfigMap %s/%s, which this copy did not write: %w", dst.Namespace, toName, err)
	}
	return r.client.Create(ctx, dst)
}

// copyMeta is a copy of src as a new object in the destroy namespace.
func (r *provider[T]) copyMeta(src client.Object, namespace, name string, labels map[string]string, owner metav1.OwnerReference, keepAnnotations bool) client.Object {
	dst := src.DeepCopyObject().(client.Object)
	resetMeta(dst, namespace, name)
	dst.SetLabels(labels)
	dst.SetOwnerReferences([]metav1.OwnerReference{owner})
	if !keepAnnotations {
		dst.SetAnnotations(nil)
	}
	return dst
}

func equalStrings(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func equalBytes(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || string(w) != string(v) {
			return false
		}
	}
	return true
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
// its UID, so that objects of the same name (one deleted, one re-created) do not meet there.
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

// toOriginal maps a copy in a destroy namespace to the object it destroys for, so the object
// learns at once that its copy's destroy finished. Only objects in destroy namespaces (which
// only the manager writes) are mapped: an annotation in a tenant's namespace brings nothing back.
func toOriginal(kind, prefix string) func(context.Context, client.Object) []reconcile.Request {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		k, ref, ok := strings.Cut(o.GetAnnotations()[captfv1.DestroyForAnnotation], " ")
		ns, name, ok2 := strings.Cut(ref, "/")
		if prefix == "" || !strings.HasPrefix(o.GetNamespace(), prefix) || !ok || !ok2 || k != kind || o.GetLabels()[captfv1.DestroyForUIDLabel] == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}}
	}
}

// kubectlResource is the resource name kubectl takes for a CAPTF kind.
func kubectlResource(kind string) string {
	k, _ := captfv1.LookupKind(kind)
	return k.Resource
}

// The copies that destroy elsewhere are created and deleted by the manager.
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters;terraformmachines;terraformmachinepools,verbs=create;delete
