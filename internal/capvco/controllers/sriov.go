package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/addons"
	"github.com/capx-io/capx/internal/capvco/sriov"
)

// observeSRIOV decides SRIOVAgentReady, with spec.sriov.enabled: the two credential Secrets
// (the agent's must not be the cluster's) and the agent DaemonSet as the delivery read it back
// this pass. An agent the delivery did not look at this pass (available, within its resync)
// leaves the condition as the last pass set it.
func (r *clusterProvider) observeSRIOV(ctx context.Context, p *clusterPass) error {
	spec := p.vc.Spec.SRIOV
	if spec == nil || !spec.Enabled {
		return nil
	}
	o := sriov.Observed{Spec: spec}
	if p.obs.addons != nil {
		for _, out := range p.obs.addons.Addons {
			if out.Name != (addons.SRIOVAgent{}).Name() {
				continue
			}
			if !out.Checked && out.Err == nil && p.obs.addons.Waiting == "" {
				return nil
			}
			o.Agent, o.AgentErr = out.DaemonSets[addons.SRIOVAgentDaemonSet], out.Err
		}
	}
	cluster := &corev1.Secret{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: p.vc.Namespace, Name: p.vc.Spec.CredentialsRef.Name}, cluster); err == nil {
		o.ClusterCredential = cluster
	}
	if ref := spec.CredentialSecretRef; ref != nil && ref.Name != "" {
		cred := &corev1.Secret{}
		switch err := r.client.Get(ctx, client.ObjectKey{Namespace: p.vc.Namespace, Name: ref.Name}, cred); {
		case err == nil:
			o.Credential = cred
		case !apierrors.IsNotFound(err):
			o.CredentialErr = err
		}
	}
	p.obs.sriov = sriov.Ready(o)
	return nil
}

// setSRIOVCondition: no condition without spec.sriov.enabled; else what observeSRIOV decided,
// or the last pass's when it did not look.
func setSRIOVCondition(vc *capvcov1.VCOCluster, rd *sriov.Readiness) {
	if vc.Spec.SRIOV == nil || !vc.Spec.SRIOV.Enabled {
		conditions.Delete(vc, capvcov1.SRIOVAgentReadyCondition)
		return
	}
	if rd == nil {
		if conditions.Get(vc, capvcov1.SRIOVAgentReadyCondition) == nil {
			set(vc, capvcov1.SRIOVAgentReadyCondition, metav1.ConditionUnknown, capvcov1.ProvisioningReason, "waits for the cluster's infrastructure")
		}
		return
	}
	set(vc, capvcov1.SRIOVAgentReadyCondition, rd.Status, rd.Reason, rd.Message)
}
