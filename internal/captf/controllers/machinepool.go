package controllers

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/inputs"
	"github.com/capx-io/capx/internal/captf/outputs"
)

// replicasManager is the value of cluster.x-k8s.io/replicas-managed-by that claims a
// MachinePool's replicas for CAPTF while the pool's module autoscales.
const replicasManager = "captf"

// machinePoolKind is the TerraformMachinePool's part: a group of machines re-applied whenever
// its inputs change.
type machinePoolKind struct{}

func (machinePoolKind) workspace(mp *captfv1.TerraformMachinePool) (*captfv1.WorkspaceSpec, *captfv1.WorkspaceStatus, *captfv1.InitializationStatus) {
	return &mp.Spec.WorkspaceSpec, &mp.Status.WorkspaceStatus, &mp.Status.Initialization
}

func (machinePoolKind) mutable() bool { return true }

func (machinePoolKind) finalizer() string { return captfv1.TerraformMachinePoolFinalizer }

// roleInputs renders the MachinePool's name, replicas, bootstrap data, failure domains, version,
// node labels and autoscaling bounds, the instances the module has and those to remove, with
// the cluster's exports and failure domains. While the module autoscales, it first hands the
// observed replicas back to the MachinePool; it keeps one infrastructure machine per instance
// (machinepoolmachines.go).
func (machinePoolKind) roleInputs(ctx context.Context, e *engine, p *pass[*captfv1.TerraformMachinePool], src *inputs.Source) (string, error) {
	mp := p.scope.MachinePool
	if mp == nil {
		if !p.scope.Object.GetDeletionTimestamp().IsZero() {
			if _, err := e.syncPoolMachines(ctx, p, 0); err != nil {
				return "", err
			}
		}
		return captfv1.WaitingForOwnerReason, nil
	}
	var observed *int32
	if p.outputs != nil {
		observed = p.outputs.Replicas
	}
	scaling := scalingOf(mp, observed)
	p.scaling = &scaling
	if p.scope.Object.GetDeletionTimestamp().IsZero() {
		if err := e.syncReplicas(ctx, p); err != nil {
			return "", err
		}
	}
	machines, err := e.syncPoolMachines(ctx, p, p.scaling.replicas)
	if err != nil {
		return "", err
	}
	exports, clusterFDs, wait, err := e.clusterExports(ctx, p.scope.Cluster, p.tfCluster)
	if wait != "" || err != nil {
		return wait, err
	}
	data, format, wait, err := e.bootstrapData(ctx, mp.Namespace, mp.Spec.Template.Spec.Bootstrap)
	if wait != "" || err != nil {
		return wait, err
	}
	src.MachinePool = &inputs.MachinePoolInputs{
		MachinePoolName: mp.Name, Replicas: machines.replicas,
		BootstrapData: data, BootstrapFormat: format,
		FailureDomains: mp.Spec.FailureDomains, ClusterFailureDomains: clusterFDs,
		KubernetesVersion: mp.Spec.Template.Spec.Version, NodeLabels: mp.Spec.Template.ObjectMeta.Labels,
		Autoscaling:      p.scaling.bounds,
		CurrentInstances: machines.current, InstancesToRemove: machines.remove,
	}
	src.ClusterOutputs = exports
	return "", e.holdExports(ctx, p, src)
}

// poolScaling is who sizes a pool and what that asks of its MachinePool, decided by scalingOf.
type poolScaling struct {
	// reason and message are the AutoscalingActive condition's.
	reason, message string
	// bounds are the module's autoscaling input while it is active; nil renders it off.
	bounds *inputs.Autoscaling
	// replicas is the replicas input.
	replicas int32
	// annotate is the replicas-managed-by value to write onto the MachinePool (claim: "captf";
	// release: ""), nil to leave the annotation as it is.
	annotate *string
	// writeBack is the observed count to copy into MachinePool.spec.replicas, nil for none.
	writeBack *int32
}

// scalingOf decides who sizes the pool. The module's own autoscaling is active when the
// MachinePool carries both autoscaler size annotations as integers with 0 <= min <= max and no
// other manager claims its replicas (cluster.x-k8s.io/replicas-managed-by absent, "false" or
// "captf"). Then CAPTF claims the replicas, renders the observed count (the module's replicas
// output; MachinePool.spec.replicas before there is one) clamped to the bounds, and copies the
// observed count back into MachinePool.spec.replicas, so CAPI reports the size the
// infrastructure has. Otherwise MachinePool.spec.replicas (default 1) is the size, nothing is
// written back, and a claim CAPTF made earlier is released. A foreign manager's claim is never
// touched.
func scalingOf(mp *clusterv1.MachinePool, observed *int32) poolScaling {
	a := mp.Annotations
	desired := ptr.Deref(mp.Spec.Replicas, 1)
	manager, claimed := a[clusterv1.ReplicasManagedByAnnotation]
	s := poolScaling{replicas: desired}
	if manager == replicasManager {
		s.annotate = ptr.To("") // released unless active below
	}
	lo, hasLo := a[clusterv1.AutoscalerMinSizeAnnotation]
	hi, hasHi := a[clusterv1.AutoscalerMaxSizeAnnotation]
	if !hasLo && !hasHi {
		s.reason, s.message = captfv1.AutoscalingDisabledReason, "The MachinePool has no autoscaler size annotations; spec.replicas sizes the pool"
		return s
	}
	minimum, errLo := strconv.ParseInt(lo, 10, 32)
	maximum, errHi := strconv.ParseInt(hi, 10, 32)
	if errLo != nil || errHi != nil || minimum < 0 || minimum > maximum {
		s.reason = captfv1.AutoscalingAnnotationsInvalidReason
		s.message = fmt.Sprintf("The MachinePool's annotations %s=%q and %s=%q must both be integers with 0 <= min <= max; spec.replicas sizes the pool",
			clusterv1.AutoscalerMinSizeAnnotation, lo, clusterv1.AutoscalerMaxSizeAnnotation, hi)
		return s
	}
	if claimed && manager != "false" && manager != replicasManager {
		s.reason = captfv1.ReplicasManagedExternallyReason
		s.message = fmt.Sprintf("The MachinePool's %s is %q: that manager owns spec.replicas, which sizes the pool; CAPTF never writes it",
			clusterv1.ReplicasManagedByAnnotation, manager)
		return s
	}
	s.annotate = nil
	if manager != replicasManager {
		s.annotate = ptr.To(replicasManager)
	}
	s.bounds = &inputs.Autoscaling{Enabled: true, Min: int32(minimum), Max: int32(maximum)}
	current := desired
	if observed != nil {
		current = *observed
		if mp.Spec.Replicas == nil || *mp.Spec.Replicas != current {
			s.writeBack = ptr.To(current)
		}
	}
	s.replicas = min(max(current, s.bounds.Min), s.bounds.Max)
	s.reason = captfv1.ReplicasManagedByModuleReason
	s.message = fmt.Sprintf("The module scales the pool between %d and %d replicas; CAPTF copies the observed count into MachinePool.spec.replicas",
		minimum, maximum)
	return s
}

// syncReplicas carries out what scalingOf asked of the MachinePool: the replicas-managed-by
// claim (or its release) and the observed replicas. The patch is optimistic: a manager that
// changed the MachinePool since it was read wins, and the next pass decides again.
func (e *engine) syncReplicas(ctx context.Context, p *pass[*captfv1.TerraformMachinePool]) error {
	s, mp := p.scaling, p.scope.MachinePool
	if s.annotate == nil && s.writeBack == nil {
		return nil
	}
	patched := mp.DeepCopy()
	if s.annotate != nil {
		if *s.annotate == "" {
			delete(patched.Annotations, clusterv1.ReplicasManagedByAnnotation)
		} else {
			if patched.Annotations == nil {
				patched.Annotations = map[string]string{}
			}
			patched.Annotations[clusterv1.ReplicasManagedByAnnotation] = *s.annotate
		}
	}
	if s.writeBack != nil {
		patched.Spec.Replicas = ptr.To(*s.writeBack)
	}
	if err := e.client.Patch(ctx, patched, client.MergeFromWithOptions(mp, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("update MachinePool %s/%s replicas: %w", mp.Namespace, mp.Name, err)
	}
	if s.writeBack != nil {
		e.recorder.Eventf(p.scope.Object, corev1.EventTypeNormal, "ReplicasWrittenBack",
			"MachinePool %s spec.replicas set to the observed %d", mp.Name, *s.writeBack)
	}
	p.scope.MachinePool = patched
	return nil
}

// setPoolStatus sets what only a pool reports: status.ready, which CAPI's MachinePool
// controller reads before it takes the provider IDs, status.infrastructureMachineKind (it then
// makes a Machine per TerraformMachinePoolMachine), AutoscalingActive and
// ClusterExportsCurrent.
func setPoolStatus(p *pass[*captfv1.TerraformMachinePool]) {
	mp := p.scope.Object
	mp.Status.Ready = ptr.Deref(mp.Status.Initialization.Provisioned, false)
	mp.Status.InfrastructureMachineKind = captfv1.TerraformMachinePoolMachineKind
	if s := p.scaling; s != nil {
		status := metav1.ConditionFalse
		if s.bounds != nil {
			status = metav1.ConditionTrue
		}
		conditions.Set(mp, metav1.Condition{Type: captfv1.AutoscalingActiveCondition, Status: status,
			Reason: s.reason, Message: s.message, ObservedGeneration: mp.Generation})
	}
	setExportsCondition(mp, p.exportsHold)
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

func (machinePoolKind) maxActiveJobs(*captfv1.TerraformMachinePool) *int32 { return nil }

// defaultMembershipInterval is how often a pool's instances are refreshed by default.
const defaultMembershipInterval = 60 * time.Second

// membershipInterval is how often the pool's instances are refreshed
// (spec.membershipRefreshIntervalSeconds, default one minute).
func (machinePoolKind) membershipInterval(mp *captfv1.TerraformMachinePool) time.Duration {
	if s := ptr.Deref(mp.Spec.MembershipRefreshIntervalSeconds, 0); s > 0 {
		return time.Duration(s) * time.Second
	}
	return defaultMembershipInterval
}

func (machinePoolKind) setStatus(p *pass[*captfv1.TerraformMachinePool]) { setPoolStatus(p) }

// readyCountsApplies: a pool's failed re-apply leaves the group at the wrong size.
func (machinePoolKind) readyCountsApplies() bool { return true }
