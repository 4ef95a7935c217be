package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/inputs"
)

// renderInputs reads the durable inputs of the last apply and renders the current ones. Inputs
// that cannot be rendered yet (a dependency is missing, a variable is invalid, the result is
// too large) are an observation the decision waits on, not an error.
func (r *provider[T]) renderInputs(ctx context.Context, p *pass[T]) error {
	stored, err := inputs.Read(ctx, r.client, p.owner)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		p.stored = stored
	}
	if wait, err := r.checkCredentials(ctx, p); wait != "" || err != nil {
		p.inputsWait, p.inputsErr = wait, err
		if wait != "" {
			return nil
		}
		return err
	}
	// A machine is applied once: after provisioning it keeps the inputs it was applied with, so
	// a rotated bootstrap token or changed cluster exports never look like a change.
	if !r.kind.mutable() && ptr.Deref(p.init.Provisioned, false) && p.stored != nil {
		p.rendered = p.stored.Rendered
		return nil
	}
	role, err := contract.RoleOf(p.owner.Kind)
	if err != nil {
		return err
	}
	vars, err := inputs.ResolveVariables(ctx, r.reader, p.owner.Namespace, role, *p.spec)
	var verr *inputs.VariablesError
	if errors.As(err, &verr) {
		p.inputsWait, p.inputsErr = verr.Reason, err
		return nil
	}
	if err != nil {
		return err
	}
	src := inputs.Source{Owner: p.owner, Object: p.scope.Object, Variables: vars}
	wait, err := r.kind.roleInputs(ctx, r.engine, p, &src)
	if err != nil {
		return err
	}
	if wait != "" {
		p.inputsWait = wait
		return nil
	}
	rendered, err := inputs.Render(src)
	if errors.Is(err, inputs.ErrInputsTooLarge) {
		p.inputsWait, p.inputsErr = captfv1.InputsTooLargeReason, err
		return nil
	}
	if err != nil {
		return err
	}
	p.rendered = rendered
	return nil
}

// checkCredentials makes sure the credentials Secret the Job would read exists: a Job whose Pod
// cannot start would only wait out its deadline. Only the Secret's metadata is read.
func (r *provider[T]) checkCredentials(ctx context.Context, p *pass[T]) (string, error) {
	name := r.credentialsSecret(p)
	if name == "" {
		return "", nil
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := r.reader.Get(ctx, client.ObjectKey{Namespace: p.owner.Namespace, Name: name}, meta)
	if apierrors.IsNotFound(err) {
		return captfv1.CredentialsNotFoundReason, fmt.Errorf("the credentials Secret %s/%s does not exist; create it, or fix spec.credentialsRef", p.owner.Namespace, name)
	}
	return "", err
}

// storedInput returns one input's value as the last apply rendered it (nil if unknown).
func storedInput(s *inputs.Stored, name string) json.RawMessage {
	if s == nil || s.Rendered == nil {
		return nil
	}
	var vars map[string]json.RawMessage
	if json.Unmarshal(s.TFVars, &vars) != nil {
		return nil
	}
	return vars[name]
}

// bootstrapData reads a Machine's bootstrap Secret live (bootstrap Secrets are not cached).
// It returns "" as the wait reason once the data is there.
func (e *engine) bootstrapData(ctx context.Context, namespace string, b clusterv1.Bootstrap) (data []byte, format, wait string, err error) {
	name := ptr.Deref(b.DataSecretName, "")
	if name == "" {
		return nil, "", captfv1.WaitingForBootstrapDataReason, nil
	}
	s := &corev1.Secret{}
	if err := e.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", captfv1.WaitingForBootstrapDataReason, nil
		}
		return nil, "", "", fmt.Errorf("get bootstrap Secret %s/%s: %w", namespace, name, err)
	}
	value, ok := s.Data["value"]
	if !ok {
		return nil, "", captfv1.WaitingForBootstrapDataReason, nil
	}
	return value, strings.TrimSpace(string(s.Data["format"])), "", nil
}

// clusterExports are the TerraformCluster's exports output, read from its state (not its
// status, which clusterctl move drops). Machines and pools wait until the cluster is
// provisioned. A Cluster of another provider gives {} (nil), which DependenciesReady reports
// (ClusterNotTerraform); one whose TerraformCluster does not exist yet waits for it.
func (e *engine) clusterExports(ctx context.Context, cluster *clusterv1.Cluster, tc *captfv1.TerraformCluster) (exports []byte, failureDomains []string, wait string, err error) {
	if cluster == nil || !isTerraformCluster(cluster.Spec.InfrastructureRef) {
		return nil, nil, "", nil
	}
	if tc == nil {
		return nil, nil, captfv1.WaitingForClusterInfrastructureReason, nil
	}
	if !ptr.Deref(tc.Status.Initialization.Provisioned, false) {
		return nil, nil, captfv1.WaitingForClusterInfrastructureReason, nil
	}
	out, err := readClusterOutputs(ctx, e, tc)
	if err != nil {
		return nil, nil, "", err
	}
	if out == nil {
		return nil, nil, captfv1.WaitingForClusterInfrastructureReason, nil
	}
	for _, fd := range out.FailureDomains {
		failureDomains = append(failureDomains, fd.Name)
	}
	exports = out.Exports
	if exports == nil {
		exports = []byte("{}")
	}
	return exports, failureDomains, "", nil
}

// isTerraformCluster reports whether a Cluster's infrastructure is a TerraformCluster.
func isTerraformCluster(ref clusterv1.ContractVersionedObjectReference) bool {
	return ref.Kind == captfv1.KindCluster && ref.APIGroup == captfv1.GroupVersion.Group
}
