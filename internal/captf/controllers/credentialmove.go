package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/decide"
	"github.com/capx-io/capx/internal/captf/movelabel"
)

// labelCredentials is housekeeping: the credentials Secret the object's Jobs read carries
// clusterctl's move label while everything known to read it moves with the object's Cluster
// (decide.CredentialMoveOf), so clusterctl move carries it instead of leaving the moved objects
// without credentials on the target. Only the Secret's metadata is read and patched. It never
// fails the pass: a Secret left unlabelled is what `kubectl captf move preflight` reports.
func (r *provider[T]) labelCredentials(ctx context.Context, p *pass[T]) error {
	for _, name := range credentialsToLabel(p.owner.Kind, p.spec, p.scope.Object, p.tfCluster) {
		r.labelCredential(ctx, p, name)
	}
	return nil
}

// labelCredential decides and writes the move label of one credentials Secret.
func (r *provider[T]) labelCredential(ctx context.Context, p *pass[T], name string) {
	log := ctrl.LoggerFrom(ctx).WithValues("secret", name)
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: p.owner.Namespace, Name: name}, meta); err != nil {
		if !apierrors.IsNotFound(err) {
			log.Error(err, "Reading the credentials Secret for clusterctl move failed")
		}
		return
	}
	uses, err := movelabel.Uses(ctx, r.client, r.reader, p.owner.Namespace, name, true)
	if err != nil {
		log.Error(err, "Finding what reads the credentials Secret failed; its clusterctl move label is left as it is")
		return
	}
	d := decide.CredentialMoveOf(movelabel.Input(meta, uses))
	if d.Action == decide.MoveLabelKeep {
		return
	}
	patched := meta.DeepCopy()
	labels, annotations := patched.GetLabels(), patched.GetAnnotations()
	if labels == nil {
		labels = map[string]string{}
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	what := "labelled for clusterctl move"
	if d.Action == decide.MoveLabelSet {
		labels[clusterctlv1.ClusterctlMoveLabel] = ""
		annotations[decide.MoveLabelSetAnnotation] = "true"
	} else {
		delete(labels, clusterctlv1.ClusterctlMoveLabel)
		delete(annotations, decide.MoveLabelSetAnnotation)
		what = "no longer labelled for clusterctl move: " + d.Reason
	}
	patched.SetLabels(labels)
	patched.SetAnnotations(annotations)
	if err := r.client.Patch(ctx, patched, client.MergeFromWithOptions(meta, client.MergeFromWithOptimisticLock{})); err != nil {
		log.Error(err, "Updating the credentials Secret's clusterctl move label failed")
		return
	}
	r.recorder.Eventf(p.scope.Object, corev1.EventTypeNormal, "CredentialsMoveLabel", "Credentials Secret %s %s", name, what)
	return
}
