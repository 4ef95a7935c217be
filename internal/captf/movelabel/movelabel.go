// Package movelabel finds what reads a credential Secret in its namespace, for the decision
// (decide.CredentialMoveOf) whether clusterctl move may carry the Secret. The manager labels
// with it; `kubectl captf move preflight` reports with it.
package movelabel

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/decide"
)

// Uses lists what in the namespace reads the Secret: CAPTF objects whose spec names it as
// their credentials (spec.credentialsRef, a TerraformCluster's spec.defaults.credentialsRef),
// read with objects, and Pods that mount it or take variables from it, read with pods. The
// Pods of CAPTF's own Jobs (labelled with the owner kind) are not counted: they stop before a
// move (block-move) and never move themselves.
//
// indexed says objects is a cache with CredentialsIndex registered, so only the Secret's readers
// are read; otherwise (the plugin's live reads) the namespace's objects are listed.
func Uses(ctx context.Context, objects, pods client.Reader, namespace, secret string, indexed bool) ([]decide.SecretUse, error) {
	opts := []client.ListOption{client.InNamespace(namespace)}
	if indexed {
		opts = append(opts, client.MatchingFields{CredentialsIndex: secret})
	}
	var uses []decide.SecretUse
	add := func(kind string, o metav1.Object, ref *corev1.LocalObjectReference) {
		if ref != nil && ref.Name == secret {
			uses = append(uses, decide.SecretUse{Who: kind + "/" + o.GetName(), Moves: onOwnerChain(o)})
		}
	}
	clusters := &captfv1.TerraformClusterList{}
	if err := objects.List(ctx, clusters, opts...); err != nil {
		return nil, fmt.Errorf("list TerraformClusters: %w", err)
	}
	for i := range clusters.Items {
		tc := &clusters.Items[i]
		add(captfv1.KindCluster, tc, tc.Spec.CredentialsRef)
		if d := tc.Spec.Defaults; d != nil && (tc.Spec.CredentialsRef == nil || tc.Spec.CredentialsRef.Name != secret) {
			add(captfv1.KindCluster, tc, d.CredentialsRef)
		}
	}
	machines := &captfv1.TerraformMachineList{}
	if err := objects.List(ctx, machines, opts...); err != nil {
		return nil, fmt.Errorf("list TerraformMachines: %w", err)
	}
	for i := range machines.Items {
		add(captfv1.KindMachine, &machines.Items[i], machines.Items[i].Spec.CredentialsRef)
	}
	pools := &captfv1.TerraformMachinePoolList{}
	if err := objects.List(ctx, pools, opts...); err != nil {
		return nil, fmt.Errorf("list TerraformMachinePools: %w", err)
	}
	for i := range pools.Items {
		add(captfv1.KindMachinePool, &pools.Items[i], pools.Items[i].Spec.CredentialsRef)
	}
	podList := &corev1.PodList{}
	if err := pods.List(ctx, podList, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list Pods: %w", err)
	}
	for i := range podList.Items {
		pod := &podList.Items[i]
		if _, ours := pod.Labels[captfv1.OwnerKindLabel]; !ours && PodReads(pod, secret) {
			uses = append(uses, decide.SecretUse{Who: "Pod/" + pod.Name})
		}
	}
	return uses, nil
}

// onOwnerChain: clusterctl move carries a CAPTF object when it is owned by a Cluster, Machine
// or MachinePool (as CAPI's controllers own the infrastructure they reference).
func onOwnerChain(o metav1.Object) bool {
	for _, ref := range o.GetOwnerReferences() {
		switch ref.Kind {
		case "Cluster", "Machine", "MachinePool":
			if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && gv.Group == clusterv1.GroupVersion.Group {
				return true
			}
		}
	}
	return false
}

// PodReads reports whether a Pod reads the Secret: a volume (or projected source), an
// environment variable or envFrom, an image pull Secret.
func PodReads(pod *corev1.Pod, secret string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == secret {
			return true
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil && s.Secret.Name == secret {
					return true
				}
			}
		}
	}
	for _, r := range pod.Spec.ImagePullSecrets {
		if r.Name == secret {
			return true
		}
	}
	containers := append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range containers {
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil && e.SecretRef.Name == secret {
				return true
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == secret {
				return true
			}
		}
	}
	return false
}

// Input is the decision's input for a Secret, from its metadata only (a ServiceAccount token is
// known by the annotation naming its account), and its uses.
func Input(s metav1.Object, uses []decide.SecretUse) decide.CredentialMoveInput {
	in := decide.CredentialMoveInput{Labels: s.GetLabels(), Annotations: s.GetAnnotations(), Uses: uses}
	if _, ok := s.GetAnnotations()[corev1.ServiceAccountNameKey]; ok {
		in.Type = corev1.SecretTypeServiceAccountToken
	}
	for _, ref := range s.GetOwnerReferences() {
		in.Owners = append(in.Owners, ref.Kind+"/"+ref.Name)
	}
	return in
}

// CredentialsIndex is the field index of CAPTF objects by the credential Secrets their spec names
// (CredentialsNamed).
const CredentialsIndex = "captf.io/credentials-secrets"

// CredentialsNamed lists the credential Secrets a CAPTF object's spec names: spec.credentialsRef,
// and a TerraformCluster's spec.defaults.credentialsRef.
func CredentialsNamed(o client.Object) []string {
	var names []string
	add := func(ref *corev1.LocalObjectReference) {
		if ref != nil && ref.Name != "" && (len(names) == 0 || names[0] != ref.Name) {
			names = append(names, ref.Name)
		}
	}
	switch obj := o.(type) {
	case *captfv1.TerraformCluster:
		add(obj.Spec.CredentialsRef)
		if obj.Spec.Defaults != nil {
			add(obj.Spec.Defaults.CredentialsRef)
		}
	case *captfv1.TerraformMachine:
		add(obj.Spec.CredentialsRef)
	case *captfv1.TerraformMachinePool:
		add(obj.Spec.CredentialsRef)
	}
	return names
}
