package controllers

import (
	"context"
	"strconv"

	"k8s.io/utils/ptr"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/inputs"
	"github.com/capx-io/capx/internal/captf/outputs"
)

// Autoscaler annotations on a MachinePool that enable the module's own autoscaling.
const (
	autoscalerMinAnnotation = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
	autoscalerMaxAnnotation = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
)

// machinePoolKind is the TerraformMachinePool's part: a group of machines re-applied whenever
// its inputs change.
type machinePoolKind struct{}

func (machinePoolKind) workspace(mp *captfv1.TerraformMachinePool) (*captfv1.WorkspaceSpec, *captfv1.WorkspaceStatus, *captfv1.InitializationStatus) {
	return &mp.Spec.WorkspaceSpec, &mp.Status.WorkspaceStatus, &mp.Status.Initialization
}

func (machinePoolKind) mutable() bool { return true }

// roleInputs renders the MachinePool's name, replicas, bootstrap data, failure domains, version,
// node labels and autoscaling bounds, with the cluster's exports and failure domains.
func (machinePoolKind) roleInputs(ctx context.Context, e *engine, p *pass[*captfv1.TerraformMachinePool], src *inputs.Source) (string, error) {
	mp := p.scope.MachinePool
	if mp == nil {
		return captfv1.WaitingForOwnerReason, nil
	}
	exports, clusterFDs, wait, err := e.clusterExports(ctx, p.tfCluster)
	if wait != "" || err != nil {
		return wait, err
	}
	data, format, wait, err := e.bootstrapData(ctx, mp.Namespace, mp.Spec.Template.Spec.Bootstrap)
	if wait != "" || err != nil {
		return wait, err
	}
	src.MachinePool = &inputs.MachinePoolInputs{
		MachinePoolName: mp.Name, Replicas: ptr.Deref(mp.Spec.Replicas, 1),
		BootstrapData: data, BootstrapFormat: format,
		FailureDomains: mp.Spec.FailureDomains, ClusterFailureDomains: clusterFDs,
		KubernetesVersion: mp.Spec.Template.Spec.Version, NodeLabels: mp.Spec.Template.ObjectMeta.Labels,
		Autoscaling: autoscaling(mp.Annotations),
	}
	src.ClusterOutputs = exports
	return "", nil
}

// autoscaling reads the autoscaler bounds; both present and 0 <= min <= max enable it.
func autoscaling(a map[string]string) *inputs.Autoscaling {
	lo, errLo := strconv.ParseInt(a[autoscalerMinAnnotation], 10, 32)
	hi, errHi := strconv.ParseInt(a[autoscalerMaxAnnotation], 10, 32)
	if errLo != nil || errHi != nil || lo < 0 || lo > hi {
		return nil
	}
	return &inputs.Autoscaling{Enabled: true, Min: int32(lo), Max: int32(hi)}
}

// applyOutputs copies the group's provider IDs (CAPI reads spec.providerIDList), the observed
// replicas and the instances.
func (machinePoolKind) applyOutputs(p *pass[*captfv1.TerraformMachinePool], out *outputs.Result) {
	mp := p.scope.Object
	if out.ProviderID != "" {
		mp.Spec.ProviderID = out.ProviderID
	}
	mp.Spec.ProviderIDList = out.ProviderIDList
	if out.Replicas != nil {
		mp.Status.Replicas = *out.Replicas
	}
	mp.Status.Instances = out.Instances
}

func (machinePoolKind) dependents(context.Context, *engine, *pass[*captfv1.TerraformMachinePool]) ([]string, error) {
	return nil, nil
}
