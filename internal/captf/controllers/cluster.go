package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/inputs"
	"github.com/capx-io/capx/internal/captf/outputs"
	"github.com/capx-io/capx/internal/captf/state"
)

// clusterKind is the TerraformCluster's part: the endpoint, failure domains and exports.
type clusterKind struct{}

func (clusterKind) workspace(c *captfv1.TerraformCluster) (*captfv1.WorkspaceSpec, *captfv1.WorkspaceStatus, *captfv1.InitializationStatus) {
	return &c.Spec.WorkspaceSpec, &c.Status.WorkspaceStatus, &c.Status.Initialization
}

func (clusterKind) mutable() bool { return true }

func (clusterKind) finalizer() string { return captfv1.TerraformClusterFinalizer }

// maxActiveJobs is the TerraformCluster's own cap on its cluster's active Jobs.
func (clusterKind) maxActiveJobs(c *captfv1.TerraformCluster) *int32 { return c.Spec.MaxActiveJobs }

func (clusterKind) membershipInterval(*captfv1.TerraformCluster) time.Duration { return 0 }

func (clusterKind) setStatus(p *pass[*captfv1.TerraformCluster]) { setClusterStatus(p) }

func (clusterKind) readyCountsApplies() bool { return false }

// roleInputs renders the endpoint the user fixed (null once the module chose one, so the module
// keeps choosing), the Kubernetes version, whether the control plane is initialized (latched:
// once true in the inputs last applied it stays true, even after a move drops Cluster status)
// and the cluster network.
func (clusterKind) roleInputs(_ context.Context, _ *engine, p *pass[*captfv1.TerraformCluster], src *inputs.Source) (string, error) {
	obj, cluster := p.scope.Object, p.scope.Cluster
	if cluster == nil {
		return captfv1.WaitingForOwnerReason, nil
	}
	in := &inputs.ClusterInputs{
		KubernetesVersion: cluster.Spec.Topology.Version,
		ClusterNetwork:    inputs.ClusterNetworkOf(cluster.Spec.ClusterNetwork),
		ControlPlaneInitialized: conditions.IsTrue(cluster, clusterv1.ClusterControlPlaneInitializedCondition) ||
			ptr.Deref(cluster.Status.Initialization.ControlPlaneInitialized, false) ||
			string(storedInput(p.stored, "control_plane_initialized")) == "true",
	}
	if obj.Annotations[captfv1.EndpointSourceAnnotation] != "module" {
		switch {
		case cluster.Spec.ControlPlaneEndpoint.IsValid():
			in.ControlPlaneEndpoint = inputs.EndpointOf(cluster.Spec.ControlPlaneEndpoint)
		case obj.Spec.ControlPlaneEndpoint.IsValid():
			in.ControlPlaneEndpoint = inputs.EndpointOf(obj.Spec.ControlPlaneEndpoint)
		}
	}
	src.Cluster = in
	return "", nil
}

// applyOutputs copies the module's endpoint into spec once (CAPI reads it there), and its
// failure domains and the keys of its exports (never their values) into status. An endpoint
// the module chose and later reports differently (after an approved replace, say) is never
// written: spec.controlPlaneEndpoint is write-once and the Cluster keeps using it, so the
// difference is reported instead.
func (clusterKind) applyOutputs(p *pass[*captfv1.TerraformCluster], out *outputs.Result) {
	obj := p.scope.Object
	ep := out.ControlPlaneEndpoint
	switch {
	case ep != nil && ep.IsValid() && !obj.Spec.ControlPlaneEndpoint.IsValid():
		obj.Spec.ControlPlaneEndpoint = *ep
		setAnnotation(obj, captfv1.EndpointSourceAnnotation, "module")
	case obj.Spec.ControlPlaneEndpoint.IsValid() && obj.Annotations[captfv1.EndpointSourceAnnotation] == "":
		setAnnotation(obj, captfv1.EndpointSourceAnnotation, "user")
	case ep != nil && ep.IsValid() && obj.Annotations[captfv1.EndpointSourceAnnotation] == "module" && *ep != obj.Spec.ControlPlaneEndpoint:
		p.endpointChanged = fmt.Sprintf("The module's control_plane_endpoint output is now %s:%d, but spec.controlPlaneEndpoint keeps %s:%d "+
			"(it is written once, and the Cluster reaches its control plane there): make the module report %s:%d again, "+
			"or re-create the cluster to move its endpoint",
			ep.Host, ep.Port, obj.Spec.ControlPlaneEndpoint.Host, obj.Spec.ControlPlaneEndpoint.Port,
			obj.Spec.ControlPlaneEndpoint.Host, obj.Spec.ControlPlaneEndpoint.Port)
	}
	obj.Status.FailureDomains = out.FailureDomains
	obj.Status.Exports = out.StatusExports()
}

// dependents lists the cluster's TerraformMachines and TerraformMachinePools: they are
// destroyed before the cluster's shared infrastructure.
func (clusterKind) dependents(ctx context.Context, e *engine, p *pass[*captfv1.TerraformCluster]) ([]string, error) {
	name := p.owner.ClusterName
	if name == "" {
		return nil, nil
	}
	sel := client.MatchingLabels{clusterv1.ClusterNameLabel: name}
	var names []string
	machines := &captfv1.TerraformMachineList{}
	if err := e.client.List(ctx, machines, client.InNamespace(p.owner.Namespace), sel); err != nil {
		return nil, err
	}
	for _, m := range machines.Items {
		names = append(names, "TerraformMachine/"+m.Name)
	}
	pools := &captfv1.TerraformMachinePoolList{}
	if err := e.client.List(ctx, pools, client.InNamespace(p.owner.Namespace), sel); err != nil {
		return nil, err
	}
	for _, mp := range pools.Items {
		names = append(names, "TerraformMachinePool/"+mp.Name)
	}
	return names, nil
}

// readClusterOutputs decodes a TerraformCluster's outputs from its state; nil when it has no
// readable state or its outputs are not valid.
// Every machine and pool of the cluster reads them: the state cache decodes and maps them once
// per state serial.
func readClusterOutputs(ctx context.Context, e *engine, tc *captfv1.TerraformCluster) (*outputs.Result, error) {
	suffix := contract.StateSuffix(tc.Namespace, captfv1.KindCluster, tc.Name)
	snap, _, err := e.states.read(ctx, e.client, e.reader, tc.Namespace, suffix)
	if state.Reason(err) != "" {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the state of TerraformCluster %s/%s: %w", tc.Namespace, tc.Name, err)
	}
	opts := outputs.Options{EndpointFromUser: true}
	out, err := e.states.outputs(ctx, e.reader, snap, opts, func(m map[string]state.Output) *outputs.Result {
		return outputs.Decode(contract.RoleCluster, m, opts)
	})
	if err != nil {
		return nil, fmt.Errorf("read the outputs of TerraformCluster %s/%s: %w", tc.Namespace, tc.Name, err)
	}
	if out == nil || out.Status() != outputs.Valid {
		return nil, nil
	}
	return out, nil
}

func setAnnotation(obj interface {
	GetAnnotations() map[string]string
	SetAnnotations(map[string]string)
}, key, value string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	obj.SetAnnotations(a)
}
