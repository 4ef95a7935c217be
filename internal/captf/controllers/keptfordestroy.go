package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/jobs"
)

// A destroy needs what its Jobs read besides the state and the inputs: the credentials, the
// image pull Secrets, the Secrets and ConfigMaps the Jobs policy's env reads. Deleting a
// namespace deletes them at once, with everything else, so a destroy after the namespace's
// deletion (nsdelete.go) would find them gone: what a Job ran with is labelled
// captf.io/kept-for-destroy, and config/admission/captf-state-protection.yaml keeps the garbage
// collector and the namespace controller from deleting it while it is. The label goes once no
// CAPTF object in the namespace names it any more (releaseKept, when an object lets its
// finalizer go).

// jobReads are the Secrets and ConfigMaps a Job with these credentials and this policy reads.
type jobReads struct{ secrets, configMaps []string }

func readsOf(credentials string, pol jobs.Policy) jobReads {
	secrets, configMaps := pol.References()
	if credentials != "" {
		secrets = append([]string{credentials}, secrets...)
	}
	return jobReads{secrets: secrets, configMaps: configMaps}
}

var (
	secretKind    = corev1.SchemeGroupVersion.WithKind("Secret")
	configMapKind = corev1.SchemeGroupVersion.WithKind("ConfigMap")
)

// keepForDestroy labels what a Job about to start reads. Missing objects are left to the Job
// (and a missing credentials Secret to the decision: CredentialsNotFound); only metadata is
// read and written.
func (r *provider[T]) keepForDestroy(ctx context.Context, p *pass[T], reads jobReads) error {
	for kind, names := range map[schema.GroupVersionKind][]string{secretKind: reads.secrets, configMapKind: reads.configMaps} {
		for _, name := range names {
			m := objectMeta(kind)
			if err := r.reader.Get(ctx, client.ObjectKey{Namespace: p.owner.Namespace, Name: name}, m); err != nil {
				if client.IgnoreNotFound(err) != nil {
					return err
				}
				continue
			}
			if m.Labels[captfv1.KeptForDestroyLabel] != "true" {
				if err := r.labelKept(ctx, m, `"true"`); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// releaseKept removes the label from what no CAPTF object of the namespace but the one letting
// its finalizer go names.
func (r *provider[T]) releaseKept(ctx context.Context, p *pass[T]) error {
	var named *jobReadsSet
	for _, kind := range []schema.GroupVersionKind{secretKind, configMapKind} {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(kind.GroupVersion().WithKind(kind.Kind + "List"))
		if err := r.reader.List(ctx, list, client.InNamespace(p.owner.Namespace), client.MatchingLabels{captfv1.KeptForDestroyLabel: "true"}); err != nil {
			return fmt.Errorf("list the %ss kept for destroys in namespace %s: %w", kind.Kind, p.owner.Namespace, err)
		}
		for i := range list.Items {
			if named == nil {
				var err error
				if named, err = r.namedByOthers(ctx, p); err != nil {
					return err
				}
			}
			if !named.has(kind, list.Items[i].Name) {
				if err := r.labelKept(ctx, &list.Items[i], "null"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// jobReadsSet is what the namespace's CAPTF objects read, by kind and name.
type jobReadsSet struct{ secrets, configMaps map[string]bool }

func (s *jobReadsSet) add(r jobReads) {
	for _, n := range r.secrets {
		s.secrets[n] = true
	}
	for _, n := range r.configMaps {
		s.configMaps[n] = true
	}
}

func (s *jobReadsSet) has(kind schema.GroupVersionKind, name string) bool {
	if kind == secretKind {
		return s.secrets[name]
	}
	return s.configMaps[name]
}

// namedByOthers is what the namespace's other CAPTF objects name: their credentials and each
// Jobs policy block's reads (their own, and a TerraformCluster's defaults for its machines and
// pools).
func (r *provider[T]) namedByOthers(ctx context.Context, p *pass[T]) (*jobReadsSet, error) {
	set := &jobReadsSet{secrets: map[string]bool{}, configMaps: map[string]bool{}}
	in := client.InNamespace(p.owner.Namespace)
	var clusters captfv1.TerraformClusterList
	var machines captfv1.TerraformMachineList
	var pools captfv1.TerraformMachinePoolList
	for _, l := range []client.ObjectList{&clusters, &machines, &pools} {
		if err := r.client.List(ctx, l, in); err != nil {
			return nil, fmt.Errorf("list the CAPTF objects of namespace %s: %w", p.owner.Namespace, err)
		}
	}
	add := func(uid types.UID, w *captfv1.WorkspaceSpec) {
		if uid == p.owner.UID {
			return
		}
		creds := ""
		if w.CredentialsRef != nil {
			creds = w.CredentialsRef.Name
		}
		set.add(readsOf(creds, jobs.Effective(w.Jobs)))
	}
	for i := range clusters.Items {
		c := &clusters.Items[i]
		add(c.UID, &c.Spec.WorkspaceSpec)
		if d := c.Spec.Defaults; d != nil {
			add(c.UID, &captfv1.WorkspaceSpec{CredentialsRef: d.CredentialsRef, Jobs: d.Jobs})
		}
	}
	for i := range machines.Items {
		add(machines.Items[i].UID, &machines.Items[i].Spec.WorkspaceSpec)
	}
	for i := range pools.Items {
		add(pools.Items[i].UID, &pools.Items[i].Spec.WorkspaceSpec)
	}
	return set, nil
}

// labelKept sets the kept-for-destroy label to value (JSON: "true", or null to remove it).
func (r *provider[T]) labelKept(ctx context.Context, m *metav1.PartialObjectMetadata, value string) error {
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s}}}`, captfv1.KeptForDestroyLabel, value)
	if err := r.client.Patch(ctx, m, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("label %s %s/%s: %w", m.Kind, m.Namespace, m.Name, err)
	}
	return nil
}

func objectMeta(kind schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(kind)
	return m
}
