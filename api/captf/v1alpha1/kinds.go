package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Kind names of the CAPTF objects that run modules (the workspace kinds).
const (
	KindCluster     = "TerraformCluster"
	KindMachinePool = "TerraformMachinePool"
	KindMachine     = "TerraformMachine"
)

// KindInfo is everything the project says of one workspace kind in one place: the module
// contract (its role), the names the manager gives the kind's objects, what kubectl and users
// type, and how to make its objects. Every package that needs one of these facts reads it here.
// +kubebuilder:object:generate=false
type KindInfo struct {
	// Kind is the API kind, e.g. TerraformCluster.
	Kind string
	// Role is the module role the kind provisions: cluster, machinepool or machine (the
	// module contract's roles, internal/captf/contract).
	Role string
	// Short abbreviates the kind in the names of the objects the manager creates (Jobs,
	// Secrets): c, mp or m.
	Short string
	// Resource is the singular resource name kubectl takes, e.g. terraformcluster.
	Resource string
	// ShortName is the CRD's short name, e.g. tfc.
	ShortName string
	// New returns an empty object of the kind; NewList an empty list.
	New     func() WorkspaceObject
	NewList func() WorkspaceList
}

// Aliases are the names users may type for the kind: singular, plural and short name.
func (k KindInfo) Aliases() []string { return []string{k.Resource, k.Resource + "s", k.ShortName} }

// Kinds are the workspace kinds in tree order: the cluster, its pools, its machines.
var Kinds = []KindInfo{
	{Kind: KindCluster, Role: "cluster", Short: "c", Resource: "terraformcluster", ShortName: "tfc",
		New: func() WorkspaceObject { return &TerraformCluster{} }, NewList: func() WorkspaceList { return &TerraformClusterList{} }},
	{Kind: KindMachinePool, Role: "machinepool", Short: "mp", Resource: "terraformmachinepool", ShortName: "tfmp",
		New: func() WorkspaceObject { return &TerraformMachinePool{} }, NewList: func() WorkspaceList { return &TerraformMachinePoolList{} }},
	{Kind: KindMachine, Role: "machine", Short: "m", Resource: "terraformmachine", ShortName: "tfm",
		New: func() WorkspaceObject { return &TerraformMachine{} }, NewList: func() WorkspaceList { return &TerraformMachineList{} }},
}

// LookupKind returns the workspace kind named kind.
func LookupKind(kind string) (KindInfo, bool) {
	for _, k := range Kinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return KindInfo{}, false
}

// LookupShort returns the workspace kind whose object names use short (c, mp or m).
func LookupShort(short string) (KindInfo, bool) {
	for _, k := range Kinds {
		if k.Short == short {
			return k, true
		}
	}
	return KindInfo{}, false
}

// KindOf returns the workspace kind of obj from its Go type, not from its TypeMeta, which
// objects read through a client usually leave empty.
func KindOf(obj runtime.Object) (KindInfo, bool) {
	w, ok := obj.(WorkspaceObject)
	if !ok {
		return KindInfo{}, false
	}
	return LookupKind(w.WorkspaceKind())
}

// WorkspaceObject is an object of a workspace kind: what every kind shares.
// +kubebuilder:object:generate=false
type WorkspaceObject interface {
	metav1.Object
	runtime.Object
	// WorkspaceKind is the object's kind, whatever its TypeMeta says.
	WorkspaceKind() string
	// Workspace returns the spec and status blocks every kind shares.
	Workspace() (*WorkspaceSpec, *WorkspaceStatus)
	GetConditions() []metav1.Condition
}

// WorkspaceList is a list of a workspace kind.
// +kubebuilder:object:generate=false
type WorkspaceList interface {
	metav1.ListInterface
	runtime.Object
	// WorkspaceItems returns the list's objects, each pointing into the list.
	WorkspaceItems() []WorkspaceObject
}

// WorkspaceKind is TerraformCluster.
func (*TerraformCluster) WorkspaceKind() string { return KindCluster }

// Workspace returns the shared spec and status blocks.
func (c *TerraformCluster) Workspace() (*WorkspaceSpec, *WorkspaceStatus) {
	return &c.Spec.WorkspaceSpec, &c.Status.WorkspaceStatus
}

// WorkspaceItems returns the list's objects.
func (l *TerraformClusterList) WorkspaceItems() []WorkspaceObject { return itemsOf(l.Items) }

// WorkspaceKind is TerraformMachinePool.
func (*TerraformMachinePool) WorkspaceKind() string { return KindMachinePool }

// Workspace returns the shared spec and status blocks.
func (p *TerraformMachinePool) Workspace() (*WorkspaceSpec, *WorkspaceStatus) {
	return &p.Spec.WorkspaceSpec, &p.Status.WorkspaceStatus
}

// WorkspaceItems returns the list's objects.
func (l *TerraformMachinePoolList) WorkspaceItems() []WorkspaceObject { return itemsOf(l.Items) }

// WorkspaceKind is TerraformMachine.
func (*TerraformMachine) WorkspaceKind() string { return KindMachine }

// Workspace returns the shared spec and status blocks.
func (m *TerraformMachine) Workspace() (*WorkspaceSpec, *WorkspaceStatus) {
	return &m.Spec.WorkspaceSpec, &m.Status.WorkspaceStatus
}

// WorkspaceItems returns the list's objects.
func (l *TerraformMachineList) WorkspaceItems() []WorkspaceObject { return itemsOf(l.Items) }

// itemsOf points at each item of a list's Items.
func itemsOf[T any, PT interface {
	*T
	WorkspaceObject
}](items []T) []WorkspaceObject {
	out := make([]WorkspaceObject, len(items))
	for i := range items {
		out[i] = PT(&items[i])
	}
	return out
}
