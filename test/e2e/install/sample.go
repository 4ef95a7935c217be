package install

import (
	"context"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// Template flavors of config/local/templates.
const (
	// FlavorLocal is a CAPTF cluster of the offline test modules: a control-plane Machine, a
	// MachineDeployment and a MachinePool.
	FlavorLocal = "local"
	// FlavorVCOLocal is a CAPVCO cluster on the in-cluster simulator.
	FlavorVCOLocal = "vco-local"
)

// ClusterSpec says which sample cluster to create from a template of the repository.
type ClusterSpec struct {
	Name, Namespace, Flavor string
	// Workers is clusterctl's --worker-machine-count.
	Workers int
	// Vars are extra template variables (e.g. MACHINE_POOL_REPLICAS).
	Vars map[string]string
}

// ApplyCluster renders a template with `clusterctl generate cluster` and applies it, creating
// the namespace first. It returns the rendered manifest.
func (m *Management) ApplyCluster(ctx context.Context, r *Repository, s ClusterSpec) ([]byte, error) {
	if _, err := m.Kubectl(ctx, []byte(fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", s.Namespace)), "apply", "-f", "-"); err != nil {
		return nil, err
	}
	manifest, err := m.GenerateCluster(ctx, r, s.Name, s.Namespace, s.Flavor, s.Workers, s.Vars)
	if err != nil {
		return nil, err
	}
	if err := m.Apply(ctx, fmt.Sprintf("cluster %s/%s (flavor %s)", s.Namespace, s.Name, s.Flavor), manifest); err != nil {
		return nil, err
	}
	return manifest, nil
}

// WaitProvisioned waits until the infrastructure of a cluster is provisioned as Cluster API sees
// it: the Cluster's, every MachineDeployment's Machines created, every Machine's; and every
// MachinePool's as its infrastructure object reports it (status.initialization.provisioned).
// For pools the object is asked rather than the MachinePool because Cluster API v1.14.2's
// MachinePool controller still reads only the deprecated status.ready of the v1beta1 contract
// (core/reconcilers/machinepool/machinepool_controller_phases.go, external.IsReady), which a
// v1beta2 infrastructure machine pool need not set; the progress line shows both views.
// Its progress lines count what is done and name the CAPTF Jobs running.
func (m *Management) WaitProvisioned(ctx context.Context, namespace, name string, timeout time.Duration) error {
	return m.Wait(ctx, fmt.Sprintf("cluster %s/%s provisioned", namespace, name), timeout, func(ctx context.Context) (bool, string, error) {
		p, err := m.Provisioning(ctx, namespace, name)
		if err != nil {
			return false, "", err
		}
		return p.Done(), p.String(), nil
	})
}

// Provisioning counts what of a cluster's infrastructure Cluster API sees provisioned.
type Provisioning struct {
	Cluster                bool
	Machines, MachinesDone int
	Pools, PoolsDone       int
	// PoolsCAPI counts MachinePools whose status.initialization.infrastructureProvisioned is set.
	PoolsCAPI int
	// MissingMachines counts Machines MachineDeployments still have to create.
	MissingMachines int
	// Jobs are the CAPTF Jobs of the cluster still running.
	Jobs []string
}

// Done reports everything provisioned.
func (p Provisioning) Done() bool {
	return p.Cluster && p.MissingMachines == 0 && p.MachinesDone == p.Machines && p.PoolsDone == p.Pools
}

func (p Provisioning) String() string {
	done := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	s := fmt.Sprintf("cluster infrastructure provisioned: %s; machines %d/%d", done(p.Cluster), p.MachinesDone, p.Machines+p.MissingMachines)
	s += fmt.Sprintf("; machine pools %d/%d (%d/%d as their MachinePools report it)", p.PoolsDone, p.Pools, p.PoolsCAPI, p.Pools)
	if len(p.Jobs) > 0 {
		s += "; Jobs running: " + strings.Join(p.Jobs, ", ")
	}
	return s
}

// Provisioning reads a cluster's provisioning as Cluster API reports it.
func (m *Management) Provisioning(ctx context.Context, namespace, name string) (Provisioning, error) {
	var p Provisioning
	in := client.InNamespace(namespace)
	of := client.MatchingLabels{clusterv1.ClusterNameLabel: name}
	cluster := &clusterv1.Cluster{}
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster); err != nil {
		return p, err
	}
	p.Cluster = ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false)
	machines := &clusterv1.MachineList{}
	if err := m.Client.List(ctx, machines, in, of); err != nil {
		return p, err
	}
	for _, mc := range machines.Items {
		p.Machines++
		if ptr.Deref(mc.Status.Initialization.InfrastructureProvisioned, false) {
			p.MachinesDone++
		}
	}
	mds := &clusterv1.MachineDeploymentList{}
	if err := m.Client.List(ctx, mds, in, of); err != nil {
		return p, err
	}
	for _, md := range mds.Items {
		have := 0
		for _, mc := range machines.Items {
			if mc.Labels[clusterv1.MachineDeploymentNameLabel] == md.Name {
				have++
			}
		}
		p.MissingMachines += max(0, int(ptr.Deref(md.Spec.Replicas, 0))-have)
	}
	pools := &clusterv1.MachinePoolList{}
	if err := m.Client.List(ctx, pools, in, of); err != nil {
		return p, err
	}
	for _, mp := range pools.Items {
		p.Pools++
		if ptr.Deref(mp.Status.Initialization.InfrastructureProvisioned, false) {
			p.PoolsCAPI++
		}
		done, err := m.infraProvisioned(ctx, namespace, mp.Spec.Template.Spec.InfrastructureRef)
		if err != nil {
			return p, err
		}
		if done {
			p.PoolsDone++
		}
	}
	jobs := &batchv1.JobList{}
	if err := m.Client.List(ctx, jobs, in, of, client.MatchingLabels{captfv1.ManagedLabel: "true"}); err != nil {
		return p, err
	}
	for _, j := range jobs.Items {
		if j.Status.CompletionTime == nil && j.Status.Failed == 0 {
			p.Jobs = append(p.Jobs, j.Name)
		}
	}
	return p, nil
}

// infraProvisioned reads an infrastructure object's status.initialization.provisioned.
func (m *Management) infraProvisioned(ctx context.Context, namespace string, ref clusterv1.ContractVersionedObjectReference) (bool, error) {
	mapping, err := m.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind})
	if err != nil {
		return false, err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, obj); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	done, _, _ := unstructured.NestedBool(obj.Object, "status", "initialization", "provisioned")
	return done, nil
}

// Describe runs the real `clusterctl describe cluster`.
func (m *Management) Describe(ctx context.Context, r *Repository, namespace, name string, args ...string) (string, error) {
	out, err := r.Clusterctl(ctx, m.Kubeconfig(), append([]string{"describe", "cluster", name, "-n", namespace}, args...)...)
	return string(out), err
}
