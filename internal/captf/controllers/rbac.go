package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// The runner's identity in every namespace with CAPTF objects.
const (
	runnerServiceAccount = "captf-runner"
	runnerClusterRole    = "capx-captf-runner"
)

// ensureRunnerRBAC keeps the namespace's runner ServiceAccount and its RoleBinding to the runner
// ClusterRole (config/rbac/runner_role.yaml). Both are labelled managed, so the manager caches
// them and a steady state costs no request. A Job that names its own ServiceAccount needs none.
func (r *provider[T]) ensureRunnerRBAC(ctx context.Context, p *pass[T]) error {
	if p.policy.ServiceAccountName != "" && p.policy.ServiceAccountName != runnerServiceAccount {
		return nil
	}
	ns := p.owner.Namespace
	labels := map[string]string{captfv1.ManagedLabel: "true"}
	sa := &corev1.ServiceAccount{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: runnerServiceAccount}, sa); apierrors.IsNotFound(err) {
		sa = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: runnerServiceAccount, Labels: labels}}
		if err := r.client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create runner ServiceAccount in %s: %w", ns, err)
		}
	} else if err != nil {
		return err
	}
	rb := &rbacv1.RoleBinding{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: runnerServiceAccount}, rb); apierrors.IsNotFound(err) {
		rb = &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: runnerServiceAccount, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: runnerClusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: runnerServiceAccount, Namespace: ns}},
		}
		if err := r.client.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create runner RoleBinding in %s: %w", ns, err)
		}
	} else if err != nil {
		return err
	}
	return nil
}
