package controllers

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/labels/format"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// A TerraformMachinePool keeps one TerraformMachinePoolMachine per instance of its module's
// instances output (CAPI's MachinePool Machines contract): CAPI's MachinePool controller makes
// a Machine for each, and CAPI's Machine controller deletes it when its Machine goes. Its
// finalizer holds it until the instance has left the instances output, and while it is held,
// its instance is named in the module's instances_to_remove input.

// The pool's own kind, cluster-wide as its other kinds; deleting a pool's Machines is a right of
// the namespace role (config/rbac/namespace_role.yaml), so it holds only where CAPTF objects are.
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformmachinepoolmachines,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformmachinepoolmachines/status,verbs=get;update;patch

// Reasons the pool deletes one of its Machines (the Event's message says which).
const (
	machineInstanceGone = "its instance left the module's instances output"
	machineRemediate    = "a MachineHealthCheck marked it for remediation (OwnerRemediated=False)"
	machineScaleDown    = "it carries " + clusterv1.DeleteMachineAnnotation + " and the MachinePool's replicas are below the instances"
)

// poolMachinesIn is what planPoolMachines decides from.
type poolMachinesIn struct {
	// pool is the TerraformMachinePool's name; deleting is true once it is being deleted.
	pool     string
	deleting bool
	// instances are the pool's status.instances (the last instances output).
	instances []captfv1.MachinePoolInstance
	// infra are the TerraformMachinePoolMachines the pool owns; machines the MachinePool's
	// Machines (by CAPI's cluster-name and pool-name labels).
	infra    []captfv1.TerraformMachinePoolMachine
	machines []clusterv1.Machine
	// replicas is the size the pool is asked for (poolScaling.replicas).
	replicas int32
}

// machineDeletion is one Machine the pool deletes, and why.
type machineDeletion struct{ name, why string }

// poolMachinesOut is what planPoolMachines decided.
type poolMachinesOut struct {
	// ensure are the infrastructure machines of the instances, as they should be (name, spec,
	// status); those that exist are brought to this, the others created.
	ensure []captfv1.TerraformMachinePoolMachine
	// release are the infrastructure machines whose finalizer goes: their instance is gone (or
	// the pool is going, and its destroy takes every instance). drop are those among them
	// that no Machine holds: they are deleted too.
	release, drop []string
	// deleteMachines are the Machines the pool deletes (CAPI then drains the Node and deletes
	// the infrastructure machine).
	deleteMachines []machineDeletion
	// current and remove are the module's current_instances and instances_to_remove inputs.
	current, remove []string
	// replicas is the replicas input: the asked size, but while a Machine chosen to go is
	// still draining (its infrastructure machine not yet deleted) a scale-down waits, so the
	// module does not drop another instance meanwhile.
	replicas int32
}

// instanceIDOf is how the module names an instance in instances_to_remove: its instance_id,
// else its provider_id.
func instanceIDOf(in captfv1.MachinePoolInstance) string {
	return cmp.Or(in.InstanceName, in.ProviderID)
}

// poolMachineName names an instance's infrastructure machine (and so, CAPI's Machine): the
// pool's name and a digest of the instance's id, a valid name of at most 63 characters
// whatever the module calls its instances.
func poolMachineName(pool, id string) string {
	sum := sha256.Sum256([]byte(id))
	base := strings.TrimRight(pool[:min(len(pool), 52)], "-.")
	return base + "-" + hex.EncodeToString(sum[:])[:10]
}

// planPoolMachines decides which infrastructure machines the pool keeps, which go, which of
// its Machines it deletes, and what the module is told to remove.
func planPoolMachines(in poolMachinesIn) poolMachinesOut {
	out := poolMachinesOut{replicas: in.replicas}
	for _, inst := range in.instances {
		if id := instanceIDOf(inst); id != "" {
			out.current = append(out.current, id)
		}
	}
	infra := map[string]*captfv1.TerraformMachinePoolMachine{}
	for i := range in.infra {
		infra[in.infra[i].Name] = &in.infra[i]
	}
	if in.deleting {
		for _, m := range in.infra {
			if controllerutil.ContainsFinalizer(&m, captfv1.TerraformMachinePoolMachineFinalizer) {
				out.release = append(out.release, m.Name)
			}
		}
		return out
	}
	machineOf := map[string]*clusterv1.Machine{}
	for i := range in.machines {
		m := &in.machines[i]
		if m.Spec.InfrastructureRef.Kind == captfv1.TerraformMachinePoolMachineKind {
			machineOf[m.Spec.InfrastructureRef.Name] = m
		}
	}
	present := map[string]string{} // infrastructure machine name -> instance id
	for _, inst := range in.instances {
		id := instanceIDOf(inst)
		if id == "" {
			continue
		}
		name := poolMachineName(in.pool, id)
		present[name] = id
		if m := infra[name]; m != nil && !m.DeletionTimestamp.IsZero() {
			out.remove = append(out.remove, id)
			continue
		}
		// A module that reuses a removed instance's id: the old Machine of that name would
		// take the new infrastructure machine with it; it is made once that Machine is gone.
		if m := machineOf[name]; infra[name] == nil && m != nil && !m.DeletionTimestamp.IsZero() {
			continue
		}
		out.ensure = append(out.ensure, desiredPoolMachine(name, id, inst))
	}
	for _, m := range in.infra {
		if _, ok := present[m.Name]; ok {
			continue
		}
		owner := machineOf[m.Name]
		switch {
		case !m.DeletionTimestamp.IsZero() || owner == nil:
			if controllerutil.ContainsFinalizer(&m, captfv1.TerraformMachinePoolMachineFinalizer) {
				out.release = append(out.release, m.Name)
			}
			if m.DeletionTimestamp.IsZero() {
				out.drop = append(out.drop, m.Name)
			}
		case owner.DeletionTimestamp.IsZero():
			out.deleteMachines = append(out.deleteMachines, machineDeletion{owner.Name, machineInstanceGone})
		}
	}
	// Machines whose instance is there and whose infrastructure machine is not yet deleting:
	// those already being deleted (draining), those remediated now, and the scale-down's.
	var pending int32
	var marked []*clusterv1.Machine
	for name, m := range machineOf {
		im := infra[name]
		if _, ok := present[name]; !ok || im == nil || !im.DeletionTimestamp.IsZero() {
			continue
		}
		switch {
		case !m.DeletionTimestamp.IsZero():
			pending++
		case conditions.IsFalse(m, clusterv1.MachineOwnerRemediatedCondition):
			out.deleteMachines = append(out.deleteMachines, machineDeletion{m.Name, machineRemediate})
			pending++
		default:
			if _, ok := m.Annotations[clusterv1.DeleteMachineAnnotation]; ok {
				marked = append(marked, m)
			}
		}
	}
	live := int32(len(present) - len(out.remove))
	slices.SortFunc(marked, func(a, b *clusterv1.Machine) int { return strings.Compare(a.Name, b.Name) })
	for _, m := range marked[:min(len(marked), max(0, int(live-pending-in.replicas)))] {
		out.deleteMachines = append(out.deleteMachines, machineDeletion{m.Name, machineScaleDown})
		pending++
	}
	slices.SortFunc(out.deleteMachines, func(a, b machineDeletion) int { return strings.Compare(a.name, b.name) })
	if pending > 0 && in.replicas < live {
		out.replicas = live
	}
	return out
}

// desiredPoolMachine is an instance's infrastructure machine as the instance says: provisioned
// once it has a provider ID, ready while its state is running (or not reported).
func desiredPoolMachine(name, id string, inst captfv1.MachinePoolInstance) captfv1.TerraformMachinePoolMachine {
	m := captfv1.TerraformMachinePoolMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       captfv1.TerraformMachinePoolMachineSpec{ProviderID: inst.ProviderID, InstanceID: id},
		Status: captfv1.TerraformMachinePoolMachineStatus{
			Ready:         inst.ProviderID != "" && (inst.State == "" || inst.State == "running"),
			Addresses:     inst.Addresses,
			FailureDomain: inst.FailureDomain,
			State:         inst.State,
		},
	}
	if inst.ProviderID != "" {
		m.Status.Initialization.Provisioned = ptr.To(true)
	}
	return m
}

// syncPoolMachines keeps the pool's infrastructure machines (housekeeping, from roleInputs, so
// only while no Job runs) and returns what the module is told of its instances.
func (e *engine) syncPoolMachines(ctx context.Context, p *pass[*captfv1.TerraformMachinePool], replicas int32) (poolMachinesOut, error) {
	pool, mp := p.scope.Object, p.scope.MachinePool
	deleting := !pool.DeletionTimestamp.IsZero()
	if mp == nil && !deleting {
		return poolMachinesOut{replicas: replicas}, nil
	}
	// The pool's own, found by their owner reference (the MachinePool may be gone while the
	// pool is deleted): a look-alike with the same labels is never touched.
	var infra captfv1.TerraformMachinePoolMachineList
	if err := e.client.List(ctx, &infra, client.InNamespace(pool.Namespace)); err != nil {
		return poolMachinesOut{}, fmt.Errorf("list the pool's TerraformMachinePoolMachines: %w", err)
	}
	owned := slices.DeleteFunc(infra.Items, func(m captfv1.TerraformMachinePoolMachine) bool {
		return !slices.ContainsFunc(m.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == pool.UID })
	})
	var machines clusterv1.MachineList
	if !deleting {
		selector := client.MatchingLabels{clusterv1.MachinePoolNameLabel: format.MustFormatValue(mp.Name), clusterv1.ClusterNameLabel: mp.Spec.ClusterName}
		if err := e.client.List(ctx, &machines, client.InNamespace(pool.Namespace), selector); err != nil {
			return poolMachinesOut{}, fmt.Errorf("list the MachinePool's Machines: %w", err)
		}
	}
	out := planPoolMachines(poolMachinesIn{
		pool: pool.Name, deleting: deleting, instances: pool.Status.Instances,
		infra: owned, machines: machines.Items, replicas: replicas,
	})
	existing := map[string]*captfv1.TerraformMachinePoolMachine{}
	for i := range owned {
		existing[owned[i].Name] = &owned[i]
	}
	for i := range out.ensure {
		if err := e.ensurePoolMachine(ctx, pool, mp, existing[out.ensure[i].Name], &out.ensure[i]); err != nil {
			return out, err
		}
	}
	for _, name := range out.release {
		m := existing[name]
		before := m.DeepCopy()
		controllerutil.RemoveFinalizer(m, captfv1.TerraformMachinePoolMachineFinalizer)
		if err := e.client.Patch(ctx, m, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
			return out, fmt.Errorf("release TerraformMachinePoolMachine %s: %w", name, err)
		}
	}
	for _, name := range out.drop {
		if err := e.client.Delete(ctx, existing[name]); client.IgnoreNotFound(err) != nil {
			return out, fmt.Errorf("delete TerraformMachinePoolMachine %s: %w", name, err)
		}
	}
	for _, d := range out.deleteMachines {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: pool.Namespace, Name: d.name}}
		if err := e.client.Delete(ctx, m); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return out, fmt.Errorf("delete Machine %s: %w", d.name, err)
		}
		e.recorder.Eventf(pool, corev1.EventTypeNormal, "MachineDeleted", "Machine %s deleted: %s", d.name, d.why)
	}
	return out, nil
}

// ensurePoolMachine creates an instance's infrastructure machine (labelled for CAPI, owned by
// the pool, held by the finalizer) or brings an existing one's spec and status to want.
func (e *engine) ensurePoolMachine(ctx context.Context, pool *captfv1.TerraformMachinePool, mp *clusterv1.MachinePool, m, want *captfv1.TerraformMachinePoolMachine) error {
	if m == nil {
		m = &captfv1.TerraformMachinePoolMachine{ObjectMeta: metav1.ObjectMeta{
			Namespace: pool.Namespace, Name: want.Name,
			Labels: map[string]string{
				clusterv1.ClusterNameLabel: mp.Spec.ClusterName, clusterv1.MachinePoolNameLabel: format.MustFormatValue(mp.Name),
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: captfv1.GroupVersion.String(), Kind: captfv1.KindMachinePool, Name: pool.Name, UID: pool.UID,
			}},
			Finalizers: []string{captfv1.TerraformMachinePoolMachineFinalizer},
		}, Spec: want.Spec}
		switch err := e.client.Create(ctx, m); {
		case apierrors.IsAlreadyExists(err):
			// Not in the cache yet, or not the pool's: a later pass sees which.
			return nil
		case err != nil:
			return fmt.Errorf("create TerraformMachinePoolMachine %s: %w", want.Name, err)
		}
	} else if m.Spec != want.Spec || !controllerutil.ContainsFinalizer(m, captfv1.TerraformMachinePoolMachineFinalizer) {
		before := m.DeepCopy()
		m.Spec = want.Spec
		controllerutil.AddFinalizer(m, captfv1.TerraformMachinePoolMachineFinalizer)
		if err := e.client.Patch(ctx, m, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("update TerraformMachinePoolMachine %s: %w", want.Name, err)
		}
	}
	if reflect.DeepEqual(m.Status, want.Status) {
		return nil
	}
	before := m.DeepCopy()
	m.Status = want.Status
	if err := e.client.Status().Patch(ctx, m, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("update TerraformMachinePoolMachine %s status: %w", want.Name, err)
	}
	return nil
}

// watchPoolMachines brings a pool back when one of its infrastructure machines starts to go
// (CAPI deleted it after draining its Machine) or is gone, and when one of its Machines is
// marked: for remediation (OwnerRemediated=False), for deletion (the autoscaler's
// annotation), or starts to go.
func watchPoolMachines(c client.Client) func(*builder.Builder) *builder.Builder {
	return func(b *builder.Builder) *builder.Builder {
		return b.Watches(&captfv1.TerraformMachinePoolMachine{}, handler.EnqueueRequestsFromMapFunc(
			func(_ context.Context, o client.Object) []reconcile.Request { return poolOf(o) }), builder.WithPredicates(leaving)).
			Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(
				func(ctx context.Context, o client.Object) []reconcile.Request {
					m, ok := o.(*clusterv1.Machine)
					if !ok || m.Spec.InfrastructureRef.Kind != captfv1.TerraformMachinePoolMachineKind {
						return nil
					}
					im := &captfv1.TerraformMachinePoolMachine{}
					if c.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}, im) != nil {
						return nil
					}
					return poolOf(im)
				}), builder.WithPredicates(machineMarked))
	}
}

// poolOf maps an infrastructure machine to the TerraformMachinePool that owns it.
func poolOf(o client.Object) []reconcile.Request {
	for _, r := range o.GetOwnerReferences() {
		if r.Kind == captfv1.KindMachinePool && strings.HasPrefix(r.APIVersion, captfv1.GroupVersion.Group+"/") {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: r.Name}}}
		}
	}
	return nil
}

// machineMarked passes a Machine's events that concern its pool: created (its pool may wait on
// it), its deletion starting, the delete-machine annotation set, OwnerRemediated turning False.
var machineMarked = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return true },
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*clusterv1.Machine)
		m, okNew := e.ObjectNew.(*clusterv1.Machine)
		if !okOld || !okNew {
			return false
		}
		_, hadMark := old.Annotations[clusterv1.DeleteMachineAnnotation]
		_, hasMark := m.Annotations[clusterv1.DeleteMachineAnnotation]
		return (old.DeletionTimestamp.IsZero() && !m.DeletionTimestamp.IsZero()) || (!hadMark && hasMark) ||
			(!conditions.IsFalse(old, clusterv1.MachineOwnerRemediatedCondition) && conditions.IsFalse(m, clusterv1.MachineOwnerRemediatedCondition))
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
}
