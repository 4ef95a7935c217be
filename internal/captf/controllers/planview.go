package controllers

import (
	"context"
	"fmt"

	tfjson "github.com/hashicorp/terraform-json"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/planview"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformplanviews,verbs=get;create;delete

// publishedView is the view of a plan's changes approvers read: TerraformPlanViews, written by
// the manager, bound into the plan hash by their digest.
type publishedView struct {
	parts  []*captfv1.TerraformPlanView
	digest string
	// withheld says why the manager published a view of its own, with no value shown ("": the
	// Job's view was published).
	withheld string
	// jobSecrets are the Secrets the Job stored its view in (deleted once published).
	jobSecrets []string
}

// planView builds the view of TerraformPlan name, whose saved plan parsed as plan: the readable
// changes the plan's Job stored (redacted by the runner, which knows the run's secrets), when
// they list exactly the plan's changes, else a view of the manager's own with every change and
// no value. It writes nothing.
func (r *provider[T]) planView(ctx context.Context, p *pass[T], name string, plan *tfjson.Plan) (*publishedView, error) {
	pv := &publishedView{}
	v, err := r.jobView(ctx, p.owner.Namespace, name, pv)
	switch {
	case err != nil:
		pv.withheld = err.Error()
	case !planview.Lists(v, plan):
		pv.withheld = "the readable changes its Job stored do not list the changes of its saved plan"
	}
	if pv.withheld != "" {
		v = planview.Withhold(plan)
	}
	pv.parts, pv.digest, err = planview.Publish(v, name, p.owner.Namespace, p.owner.MoveLabels())
	return pv, err
}

// jobView reads the view the plan's Job stored in Secrets (their names go into pv).
func (r *provider[T]) jobView(ctx context.Context, namespace, plan string, pv *publishedView) (*planview.View, error) {
	first := &corev1.Secret{}
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: planview.SecretName(plan)}, first); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("its Job stored no readable changes")
		}
		return nil, err
	}
	pv.jobSecrets = append(pv.jobSecrets, first.Name)
	n, err := planview.Chunks(first)
	if err != nil {
		return nil, err
	}
	secrets := []*corev1.Secret{first}
	for i := 1; i < n; i++ {
		s := &corev1.Secret{}
		if err := r.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: planview.ChunkName(plan, i)}, s); err != nil {
			return nil, fmt.Errorf("read the readable changes its Job stored: %w", err)
		}
		pv.jobSecrets = append(pv.jobSecrets, s.Name)
		secrets = append(secrets, s)
	}
	return planview.Decode(plan, secrets)
}

// publishView writes the view's TerraformPlanViews, owned by the plan (so they go and move with
// it), and deletes the Secrets its Job stored it in. A view part already there is kept only if
// it is this one; anything else of its name is replaced.
func (r *provider[T]) publishView(ctx context.Context, tp *captfv1.TerraformPlan, pv *publishedView) error {
	ref := metav1.OwnerReference{APIVersion: captfv1.GroupVersion.String(), Kind: "TerraformPlan", Name: tp.Name, UID: tp.UID,
		Controller: ptr.To(true)}
	for _, part := range pv.parts {
		part.OwnerReferences = []metav1.OwnerReference{ref}
		err := r.client.Create(ctx, part.DeepCopy())
		if !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return fmt.Errorf("publish TerraformPlanView %s: %w", part.Name, err)
			}
			continue
		}
		have := &captfv1.TerraformPlanView{}
		if err := r.reader.Get(ctx, client.ObjectKeyFromObject(part), have); err != nil {
			return err
		}
		if have.Digest == part.Digest && string(have.Data) == string(part.Data) && metav1.IsControlledBy(have, tp) {
			continue
		}
		if err := r.client.Delete(ctx, have, client.Preconditions{UID: &have.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("replace TerraformPlanView %s: %w", part.Name, err)
		}
		if err := r.client.Create(ctx, part.DeepCopy()); err != nil {
			return fmt.Errorf("publish TerraformPlanView %s: %w", part.Name, err)
		}
	}
	for _, name := range pv.jobSecrets {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tp.Namespace, Name: name}}
		if err := r.client.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete Secret %s, the view the Job stored: %w", name, err)
		}
	}
	return nil
}

// adoptSecrets hands the named Secrets of a plan (its saved plan), written by its Job and owned
// by the object until the plan exists, to the TerraformPlan: the plan alone controls them, so
// they go with it, and clusterctl move moves them with it (they carry its move label). A Secret
// that is gone is skipped.
func (r *provider[T]) adoptSecrets(ctx context.Context, tp *captfv1.TerraformPlan, names []string) error {
	ref := metav1.OwnerReference{APIVersion: captfv1.GroupVersion.String(), Kind: "TerraformPlan", Name: tp.Name, UID: tp.UID,
		Controller: ptr.To(true)}
	for _, name := range names {
		s := &corev1.Secret{}
		if err := r.reader.Get(ctx, client.ObjectKey{Namespace: tp.Namespace, Name: name}, s); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if len(s.OwnerReferences) == 1 && s.OwnerReferences[0].UID == tp.UID {
			continue
		}
		patch := client.MergeFrom(s.DeepCopy())
		s.OwnerReferences = []metav1.OwnerReference{ref}
		if err := r.client.Patch(ctx, s, patch); err != nil {
			return fmt.Errorf("hand Secret %s to TerraformPlan %s: %w", s.Name, tp.Name, err)
		}
	}
	return nil
}
