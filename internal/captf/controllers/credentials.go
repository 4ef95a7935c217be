package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// A destroy needs the credentials its module was applied with. Deleting a namespace deletes
// them at once, with everything else, so a destroy after the namespace's deletion (nsdelete.go)
// would find them gone: a credentials Secret a Job ran with is labelled captf.io/credentials,
// and config/admission/captf-state-protection.yaml keeps the garbage collector and the namespace
// controller from deleting it while it is. The label goes once no CAPTF object in the
// namespace names the Secret any more (releaseCredentials, when an object lets its finalizer go).

// protectCredentials labels the credentials Secret a Job is about to run with. A missing Secret
// is left to the decision (CredentialsNotFound); only its metadata is read and written.
func (r *provider[T]) protectCredentials(ctx context.Context, p *pass[T], name string) error {
	if name == "" {
		return nil
	}
	m := secretMeta()
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: p.owner.Namespace, Name: name}, m); err != nil {
		return client.IgnoreNotFound(err)
	}
	if m.Labels[captfv1.CredentialsLabel] == "true" {
		return nil
	}
	return r.labelCredentials(ctx, m, `"true"`)
}

// releaseCredentials removes the label from the namespace's credentials Secrets that no CAPTF
// object but the one letting its finalizer go names.
func (r *provider[T]) releaseCredentials(ctx context.Context, p *pass[T]) error {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := r.reader.List(ctx, list, client.InNamespace(p.owner.Namespace), client.MatchingLabels{captfv1.CredentialsLabel: "true"}); err != nil {
		return fmt.Errorf("list the credentials Secrets of namespace %s: %w", p.owner.Namespace, err)
	}
	if len(list.Items) == 0 {
		return nil
	}
	named, err := r.credentialsNamed(ctx, p)
	if err != nil {
		return err
	}
	for i := range list.Items {
		if !named[list.Items[i].Name] {
			if err := r.labelCredentials(ctx, &list.Items[i], "null"); err != nil {
				return err
			}
		}
	}
	return nil
}

// credentialsNamed are the credentials Secrets the namespace's other CAPTF objects name: their
// own, and a TerraformCluster's default for its machines and pools.
func (r *provider[T]) credentialsNamed(ctx context.Context, p *pass[T]) (map[string]bool, error) {
	named := map[string]bool{}
	add := func(uid types.UID, refs ...*corev1.LocalObjectReference) {
		for _, ref := range refs {
			if ref != nil && uid != p.owner.UID {
				named[ref.Name] = true
			}
		}
	}
	in := client.InNamespace(p.owner.Namespace)
	var clusters captfv1.TerraformClusterList
	var machines captfv1.TerraformMachineList
	var pools captfv1.TerraformMachinePoolList
	for _, l := range []client.ObjectList{&clusters, &machines, &pools} {
		if err := r.client.List(ctx, l, in); err != nil {
			return nil, fmt.Errorf("list the CAPTF objects of namespace %s: %w", p.owner.Namespace, err)
		}
	}
	for _, c := range clusters.Items {
		add(c.UID, c.Spec.CredentialsRef)
		if c.Spec.Defaults != nil {
			add(c.UID, c.Spec.Defaults.CredentialsRef)
		}
	}
	for _, m := range machines.Items {
		add(m.UID, m.Spec.CredentialsRef)
	}
	for _, m := range pools.Items {
		add(m.UID, m.Spec.CredentialsRef)
	}
	return named, nil
}

// labelCredentials sets the credentials label to value (JSON: "true", or null to remove it).
func (r *provider[T]) labelCredentials(ctx context.Context, m *metav1.PartialObjectMetadata, value string) error {
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s}}}`, captfv1.CredentialsLabel, value)
	if err := r.client.Patch(ctx, m, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("label credentials Secret %s/%s: %w", m.Namespace, m.Name, err)
	}
	return nil
}

func secretMeta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return m
}
