package sriov

import (
	"bytes"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/vco"
)

// ConditionType is the VCOCluster condition that says whether the SR-IOV agent runs.
const ConditionType = capvcov1.SRIOVAgentReadyCondition

// Reasons of the condition.
const (
	ReasonReady                    = "AgentReady"
	ReasonCredentialMissing        = "SRIOVCredentialMissing"
	ReasonCredentialNotFound       = "SRIOVCredentialNotFound"
	ReasonCredentialUnreadable     = "SRIOVCredentialUnreadable"
	ReasonCredentialInvalid        = "SRIOVCredentialInvalid"
	ReasonClusterCredentialRefused = "ClusterCredentialRefused"
	ReasonAgentNotDelivered        = "AgentNotDelivered"
	ReasonNoNodes                  = "NoNodesForAgent"
	ReasonAgentNotReady            = "AgentNotReady"
)

// Observed is what the VCOCluster controller sees of the add-on.
type Observed struct {
	Spec *capvcov1.SRIOVSpec
	// ClusterCredential is the cluster's own credential Secret, for telling the two apart.
	ClusterCredential *corev1.Secret
	// Credential is spec.sriov.credentialSecretRef's Secret (nil: not found); CredentialErr
	// is an error reading it other than not found.
	Credential    *corev1.Secret
	CredentialErr error
	// Agent is the agent DaemonSet in the workload cluster as the add-on delivery read it back
	// (nil: not installed, or not read); AgentErr is why the delivery could not install or read
	// it.
	Agent    *appsv1.DaemonSet
	AgentErr error
}

// Readiness is the condition's content.
type Readiness struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// Ready decides the condition; nil means SR-IOV is not enabled and the condition is not set.
// Every False says why the agent cannot run and what to do.
func Ready(o Observed) *Readiness {
	no := func(reason, format string, args ...any) *Readiness {
		return &Readiness{Status: metav1.ConditionFalse, Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	if o.Spec == nil || !o.Spec.Enabled {
		return nil
	}
	ref := o.Spec.CredentialSecretRef
	switch {
	case ref == nil || ref.Name == "":
		return no(ReasonCredentialMissing, "sriov.enabled is set without sriov.credentialSecretRef: the agent needs a credential of its own, scoped to this cluster's cloudspaces")
	case o.ClusterCredential != nil && ref.Name == o.ClusterCredential.Name:
		return no(ReasonClusterCredentialRefused, "sriov.credentialSecretRef names the cluster's own credential %q, which would put customer-wide access on every worker: create a credential scoped to this cluster's cloudspaces", ref.Name)
	case o.CredentialErr != nil:
		return no(ReasonCredentialUnreadable, "reading Secret %q: %v", ref.Name, o.CredentialErr)
	case o.Credential == nil:
		return no(ReasonCredentialNotFound, "Secret %q (sriov.credentialSecretRef) does not exist in the VCOCluster's namespace", ref.Name)
	}
	if _, err := vco.CredentialsFromSecret(o.Credential.Data); err != nil {
		return no(ReasonCredentialInvalid, "Secret %q: %v", ref.Name, err)
	}
	if o.ClusterCredential != nil && SameCredential(o.Credential.Data, o.ClusterCredential.Data) {
		return no(ReasonClusterCredentialRefused, "Secret %q holds the same credential as the cluster's %q: the agent runs beside tenant workloads on every worker, so it takes a credential scoped to this cluster's cloudspaces", ref.Name, o.ClusterCredential.Name)
	}
	if o.Agent == nil {
		if o.AgentErr != nil {
			return no(ReasonAgentNotDelivered, "the agent DaemonSet could not be installed in the workload cluster (namespace %s): %v", Namespace, o.AgentErr)
		}
		return no(ReasonAgentNotDelivered, "the agent DaemonSet is not installed in the workload cluster yet (namespace %s)", Namespace)
	}
	a := o.Agent.Status
	switch {
	case a.ObservedGeneration < o.Agent.Generation:
		return no(ReasonAgentNotReady, "the DaemonSet controller has not rolled out the agent's current version yet")
	case a.DesiredNumberScheduled == 0:
		return no(ReasonNoNodes, "no node runs the agent: the cluster has no worker nodes yet")
	case a.NumberAvailable < a.DesiredNumberScheduled || a.UpdatedNumberScheduled < a.DesiredNumberScheduled:
		return no(ReasonAgentNotReady, "the agent is available on %d of %d nodes (%d updated); kubectl -n %s get pods shows why the others are not",
			a.NumberAvailable, a.DesiredNumberScheduled, a.UpdatedNumberScheduled, Namespace)
	}
	return &Readiness{Status: metav1.ConditionTrue, Reason: ReasonReady, Message: fmt.Sprintf("the agent is available on all %d nodes", a.NumberAvailable)}
}

// SameCredential says whether two credential Secrets authenticate as the same principal: the
// same token, or the same client id and secret.
func SameCredential(a, b map[string][]byte) bool {
	eq := func(k string) bool { return len(a[k]) > 0 && bytes.Equal(bytes.TrimSpace(a[k]), bytes.TrimSpace(b[k])) }
	return eq(vco.SecretKeyJWT) || (eq(vco.SecretKeyClientID) && eq(vco.SecretKeyClientSecret))
}
