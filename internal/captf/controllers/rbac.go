package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
)

// The runner's identity in every namespace with CAPTF objects.
const (
	runnerServiceAccount = "captf-runner"
	runnerClusterRole    = "capx-captf-runner"
)

// runnerLabels are the labels of the runner ServiceAccount and RoleBinding the manager keeps:
// managed (the manager caches them, so a steady state costs no request) and, on the
// ServiceAccount, the runner opt-in every Job's account must carry.
func runnerLabels() map[string]string {
	return map[string]string{captfv1.ManagedLabel: "true", captfv1.RunnerLabel: "true"}
}

// ensureRunnerRBAC keeps the namespace's runner ServiceAccount and its RoleBinding to the runner
// ClusterRole (config/rbac/runner_role.yaml). An existing binding of that name is checked: a
// roleRef other than the runner role is replaced (roleRef is immutable), subjects other than the
// runner account are reset. Objects found without the labels (created by hand, or by an older
// manager) get them, so the next pass finds them in the cache instead of trying to create them
// again. A Job that names its own ServiceAccount needs none of this (see checkServiceAccount).
//
// In a namespace being deleted nothing can be created and no Job runs: nothing is kept there.
func (r *provider[T]) ensureRunnerRBAC(ctx context.Context, p *pass[T]) error {
	if err := r.keepRunnerRBAC(ctx, p); !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return err
	}
	return nil
}

func (r *provider[T]) keepRunnerRBAC(ctx context.Context, p *pass[T]) error {
	if p.policy.ServiceAccountName != "" && p.policy.ServiceAccountName != runnerServiceAccount {
		return nil
	}
	ns := p.owner.Namespace
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: runnerServiceAccount, Labels: runnerLabels()}}
	if err := r.ensureLabelled(ctx, sa, &corev1.ServiceAccount{}); err != nil {
		return fmt.Errorf("runner ServiceAccount in %s: %w", ns, err)
	}
	want := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: runnerServiceAccount, Labels: map[string]string{captfv1.ManagedLabel: "true"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: runnerClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: runnerServiceAccount, Namespace: ns}},
	}
	have := &rbacv1.RoleBinding{}
	if err := r.ensureLabelled(ctx, want.DeepCopy(), have); err != nil {
		return fmt.Errorf("runner RoleBinding in %s: %w", ns, err)
	}
	if have.RoleRef != want.RoleRef {
		// roleRef cannot change: the binding is re-created. Deleting with the UID read means a
		// binding someone re-created meanwhile is left for the next pass to judge.
		if err := r.client.Delete(ctx, have, client.Preconditions{UID: &have.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("replace runner RoleBinding in %s (roleRef %s %s): %w", ns, have.RoleRef.Kind, have.RoleRef.Name, err)
		}
		if err := r.client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create runner RoleBinding in %s: %w", ns, err)
		}
		return nil
	}
	if !slices.Equal(have.Subjects, want.Subjects) {
		before := have.DeepCopy()
		have.Subjects = want.Subjects
		if err := r.client.Patch(ctx, have, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("reset the subjects of runner RoleBinding in %s: %w", ns, err)
		}
	}
	return nil
}

// ensureLabelled makes sure want exists with at least its labels and leaves the object as it is
// in have. The cache holds only labelled objects: one missing there is created, and when it
// already exists unlabelled it is read live and labelled, once.
func (r *provider[T]) ensureLabelled(ctx context.Context, want, have client.Object) error {
	key := client.ObjectKeyFromObject(want)
	err := r.client.Get(ctx, key, have)
	if apierrors.IsNotFound(err) {
		if err = r.client.Create(ctx, want); err == nil || apierrors.IsAlreadyExists(err) {
			err = r.reader.Get(ctx, key, have)
		}
	}
	if err != nil {
		return err
	}
	before := have.DeepCopyObject().(client.Object)
	labels, changed := have.GetLabels(), false
	for k, v := range want.GetLabels() {
		if labels[k] != v {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k], changed = v, true
		}
	}
	if !changed {
		return nil
	}
	have.SetLabels(labels)
	return r.client.Patch(ctx, have, client.MergeFrom(before))
}

// checkServiceAccount checks, live, that the account a Job runs as carries captf.io/runner=true:
// spec.jobs.serviceAccountName must not lend a Job some other account of the namespace (a
// controller's, say) with whatever that account may do. A non-empty invalid is the
// JobPolicyInvalid message.
func (r *provider[T]) checkServiceAccount(ctx context.Context, p *pass[T]) (invalid string, err error) {
	name := p.policy.ServiceAccountName
	if name == "" {
		name = runnerServiceAccount
	}
	sa := &corev1.ServiceAccount{}
	err = r.reader.Get(ctx, client.ObjectKey{Namespace: p.owner.Namespace, Name: name}, sa)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("the Job's ServiceAccount %s (spec.jobs.serviceAccountName) does not exist in namespace %s; create it with the label %s=true, or leave serviceAccountName unset to run as %s",
			name, p.owner.Namespace, captfv1.RunnerLabel, runnerServiceAccount), nil
	case err != nil:
		return "", err
	case name == runnerServiceAccount && sa.Labels[captfv1.ManagedLabel] == "true":
		// The manager's own (labelled as a runner on its next normal pass, if an older manager
		// created it): a deleting object, whose passes keep no RBAC, still gets its destroy.
	case sa.Labels[captfv1.RunnerLabel] != "true":
		return fmt.Sprintf("the Job's ServiceAccount %s (spec.jobs.serviceAccountName) does not carry the label %s=true, so CAPTF will not run Jobs as it; label it (kubectl label serviceaccount %s -n %s %s=true) or leave serviceAccountName unset to run as %s",
			name, captfv1.RunnerLabel, name, p.owner.Namespace, captfv1.RunnerLabel, runnerServiceAccount), nil
	}
	return "", nil
}

// runnerLocks names the Role (and its RoleBinding) that lets the runner accounts of a namespace
// take the state locks of that namespace's CAPTF objects, and nothing else among its Leases.
const runnerLocks = "captf-runner-locks"

// ensureLockAccess lets the Job's account take its object's state lock: the lock Lease exists
// (created unlocked, as the backend leaves it after an unlock, so the runner never needs to
// create Leases), its name is one of the resourceNames of the namespace's runner-locks Role,
// and the account is bound to that Role. RBAC cannot grant by name prefix, and create cannot be
// limited by name, so this is how the runner's Lease rights stop at the state locks: the other
// Leases of the namespace (leader election, say) are out of its reach. Called just before a
// Job is created; everything is read live (Roles are not cached) and written only when missing.
func (r *provider[T]) ensureLockAccess(ctx context.Context, p *pass[T]) error {
	ns, suffix := p.owner.Namespace, p.owner.StateSuffix()
	lockName := contract.LockLeaseName(suffix)
	labels := p.owner.MoveLabels()
	labels[contract.BackendStateLabel] = "true"
	labels[contract.BackendSuffixLabel] = suffix
	labels[contract.BackendWorkspaceLabel] = "default"
	labels[contract.BackendManagedByLabel] = "terraform"
	lock := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lockName, Labels: labels}}
	if err := r.client.Create(ctx, lock); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the state lock Lease %s: %w", lockName, err)
	}

	rule := rbacv1.PolicyRule{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, Verbs: []string{"get", "update"}}
	role := &rbacv1.Role{}
	switch err := r.reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: runnerLocks}, role); {
	case apierrors.IsNotFound(err):
		rule.ResourceNames = []string{lockName}
		role = &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: runnerLocks, Labels: map[string]string{captfv1.ManagedLabel: "true"}},
			Rules:      []rbacv1.PolicyRule{rule},
		}
		if err := r.client.Create(ctx, role); err != nil {
			return fmt.Errorf("create Role %s in %s: %w", runnerLocks, ns, err)
		}
	case err != nil:
		return err
	default:
		names := []string{}
		if len(role.Rules) == 1 {
			names = role.Rules[0].ResourceNames
		}
		if len(role.Rules) != 1 || !slices.Contains(names, lockName) || !equalRule(role.Rules[0], rule) {
			rule.ResourceNames = append(slices.Clone(names), lockName)
			slices.Sort(rule.ResourceNames)
			rule.ResourceNames = slices.Compact(rule.ResourceNames)
			role.Rules = []rbacv1.PolicyRule{rule}
			// Update with the resourceVersion read: a concurrent pass adding its own name makes
			// this a conflict, retried, rather than a lost name.
			if err := r.client.Update(ctx, role); err != nil {
				return fmt.Errorf("add %s to Role %s in %s: %w", lockName, runnerLocks, ns, err)
			}
		}
	}

	account := p.policy.ServiceAccountName
	if account == "" {
		account = runnerServiceAccount
	}
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: ns}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: runnerLocks}
	rb := &rbacv1.RoleBinding{}
	switch err := r.reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: runnerLocks}, rb); {
	case apierrors.IsNotFound(err):
		rb = &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: runnerLocks, Labels: map[string]string{captfv1.ManagedLabel: "true"}},
			RoleRef:    ref, Subjects: []rbacv1.Subject{subject},
		}
		if err := r.client.Create(ctx, rb); err != nil {
			return fmt.Errorf("create RoleBinding %s in %s: %w", runnerLocks, ns, err)
		}
	case err != nil:
		return err
	case rb.RoleRef != ref:
		if err := r.client.Delete(ctx, rb, client.Preconditions{UID: &rb.UID}); client.IgnoreNotFound(err) != nil {
			return err
		}
		return fmt.Errorf("RoleBinding %s in %s bound %s %s; replaced on the next attempt", runnerLocks, ns, rb.RoleRef.Kind, rb.RoleRef.Name)
	case !slices.Contains(rb.Subjects, subject):
		rb.Subjects = append(rb.Subjects, subject)
		if err := r.client.Update(ctx, rb); err != nil {
			return fmt.Errorf("bind %s to Role %s in %s: %w", account, runnerLocks, ns, err)
		}
	}
	return nil
}

func equalRule(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) && slices.Equal(a.Verbs, b.Verbs) &&
		len(a.NonResourceURLs) == 0
}

// The manager's own rights in a namespace: it writes Jobs, Pods (dry runs), Secrets, Leases and
// the runner's RBAC only in namespaces that hold CAPTF objects, through this RoleBinding to
// config/rbac/namespace_role.yaml, which it keeps there; its ClusterRole holds no such write.
const (
	managerBinding       = "capx-manager"
	namespaceClusterRole = "capx-captf-namespace"
)

// ensureManagerAccess keeps the RoleBinding that lets the manager write in the object's
// namespace (first of all: everything after it may write). It is read from the cache (it is
// labelled managed) and written only when missing or wrong. In a namespace being deleted
// nothing can be created: the binding made before stays until the namespace's last CAPTF
// object is gone (config/admission/captf-state-protection.yaml, namespaces.go).
func (r *provider[T]) ensureManagerAccess(ctx context.Context, p *pass[T]) error {
	err := keepManagerBinding(ctx, r.client, r.reader, p.owner.Namespace, r.opts.Identity)
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return nil
	}
	return err
}

// keepManagerBinding makes sure namespace has the manager's RoleBinding, bound to identity.
func keepManagerBinding(ctx context.Context, c client.Client, live client.Reader, namespace, identity string) error {
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: namespaceClusterRole}
	subject := identitySubject(identity)
	have := &rbacv1.RoleBinding{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: managerBinding}, have)
	if apierrors.IsNotFound(err) {
		want := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: managerBinding, Labels: map[string]string{captfv1.ManagedLabel: "true"}},
			RoleRef:    ref, Subjects: []rbacv1.Subject{subject},
		}
		if err = c.Create(ctx, want); err == nil {
			return nil
		} else if apierrors.IsAlreadyExists(err) {
			err = live.Get(ctx, client.ObjectKeyFromObject(want), have)
		}
	}
	if err != nil {
		return fmt.Errorf("the manager's RoleBinding %s in %s: %w", managerBinding, namespace, err)
	}
	if have.RoleRef != ref || have.Labels[captfv1.ManagedLabel] != "true" {
		// Not the manager's own (roleRef cannot change): replaced, by the UID read.
		if err := c.Delete(ctx, have, client.Preconditions{UID: &have.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("replace RoleBinding %s in %s (roleRef %s %s): %w", managerBinding, namespace, have.RoleRef.Kind, have.RoleRef.Name, err)
		}
		return fmt.Errorf("RoleBinding %s in %s bound %s %s; replaced on the next attempt", managerBinding, namespace, have.RoleRef.Kind, have.RoleRef.Name)
	}
	if !slices.Contains(have.Subjects, subject) {
		before := have.DeepCopy()
		have.Subjects = append(have.Subjects, subject)
		if err := c.Patch(ctx, have, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("bind %s in RoleBinding %s of %s: %w", identity, managerBinding, namespace, err)
		}
	}
	return nil
}

// identitySubject is the RBAC subject of a user name as the API server authenticates it.
func identitySubject(identity string) rbacv1.Subject {
	if rest, ok := strings.CutPrefix(identity, "system:serviceaccount:"); ok {
		if ns, name, ok := strings.Cut(rest, ":"); ok {
			return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
		}
	}
	return rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: identity}
}
