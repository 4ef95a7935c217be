package controllers

import (
	"context"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/inputs"
	"github.com/capx-io/capx/internal/captf/outputs"
)

// machineKind is the TerraformMachine's part: one machine from its Machine's bootstrap data,
// applied once.
type machineKind struct{}

func (machineKind) workspace(m *captfv1.TerraformMachine) (*captfv1.WorkspaceSpec, *captfv1.WorkspaceStatus, *captfv1.InitializationStatus) {
	return &m.Spec.WorkspaceSpec, &m.Status.WorkspaceStatus, &m.Status.Initialization
}

func (machineKind) mutable() bool { return false }

func (machineKind) finalizer() string { return captfv1.TerraformMachineFinalizer }

func (machineKind) maxActiveJobs(*captfv1.TerraformMachine) *int32 { return nil }

func (machineKind) membershipInterval(*captfv1.TerraformMachine) time.Duration { return 0 }

func (machineKind) setStatus(*pass[*captfv1.TerraformMachine]) {}

func (machineKind) readyCountsApplies() bool { return false }

// roleInputs renders the Machine's name, bootstrap data, failure domain, version and role, and
// the cluster's exports; it waits for the bootstrap data and for the cluster's infrastructure.
func (machineKind) roleInputs(ctx context.Context, e *engine, p *pass[*captfv1.TerraformMachine], src *inputs.Source) (string, error) {
	m := p.scope.Machine
	if m == nil {
		return captfv1.WaitingForOwnerReason, nil
	}
	exports, _, wait, err := e.clusterExports(ctx, p.scope.Cluster, p.tfCluster)
	if wait != "" || err != nil {
		return wait, err
	}
	data, format, wait, err := e.bootstrapData(ctx, m.Namespace, m.Spec.Bootstrap)
	if wait != "" || err != nil {
		return wait, err
	}
	_, controlPlane := m.Labels[clusterv1.MachineControlPlaneLabel]
	src.Machine = &inputs.MachineInputs{
		MachineName: m.Name, BootstrapData: data, BootstrapFormat: format,
		FailureDomain: m.Spec.FailureDomain, KubernetesVersion: m.Spec.Version, ControlPlane: controlPlane,
	}
	src.ClusterOutputs = exports
	return "", nil
}

// applyOutputs latches the provider ID into spec (CAPI reads it there; the CRD refuses any
// later change, and a different value from the module is reported, never written) and copies
// the addresses and failure domain.
func (machineKind) applyOutputs(p *pass[*captfv1.TerraformMachine], out *outputs.Result) {
	m := p.scope.Object
	if m.Spec.ProviderID == "" && out.ProviderID != "" {
		m.Spec.ProviderID = out.ProviderID
	}
	p.providerIDChanged = m.Spec.ProviderID != "" && out.ProviderID != "" && out.ProviderID != m.Spec.ProviderID
	m.Status.Addresses = out.Addresses
	m.Status.FailureDomain = out.FailureDomain
}

func (machineKind) dependents(context.Context, *engine, *pass[*captfv1.TerraformMachine]) ([]string, error) {
	return nil, nil
}
