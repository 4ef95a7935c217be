// Package objects is how every `kubectl captf` command finds what its arguments name: a CAPTF
// object (TerraformCluster, TerraformMachinePool, TerraformMachine) by name or kind/name, the
// objects of a Cluster, and a TerraformPlan by its name or by its target object.
package objects

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// Object is one CAPTF object, whatever its kind.
type Object struct {
	Kind string
	Obj  client.Object
	Spec *captfv1.WorkspaceSpec
	// Status is the status every kind shares.
	Status     *captfv1.WorkspaceStatus
	Conditions []metav1.Condition
	// Cluster is the CAPI cluster-name label.
	Cluster string
}

// Name is the object's name.
func (o *Object) Name() string { return o.Obj.GetName() }

// Namespace is the object's namespace.
func (o *Object) Namespace() string { return o.Obj.GetNamespace() }

// Ref is "Kind/name".
func (o *Object) Ref() string { return o.Kind + "/" + o.Obj.GetName() }

// Owner is the jobs.Owner whose labels the manager puts on the object's Jobs and Secrets.
func (o *Object) Owner() jobs.Owner {
	ow, _ := jobs.OwnerOf(o.Obj, o.Cluster)
	return ow
}

// Wrap returns the Object view of a TerraformCluster, TerraformMachinePool or TerraformMachine.
func Wrap(obj client.Object) *Object {
	w, ok := obj.(captfv1.WorkspaceObject)
	if !ok {
		panic(fmt.Sprintf("objects: %T is not a CAPTF kind", obj))
	}
	o := &Object{Kind: w.WorkspaceKind(), Obj: obj, Cluster: obj.GetLabels()[clusterv1.ClusterNameLabel], Conditions: w.GetConditions()}
	o.Spec, o.Status = w.Workspace()
	return o
}

// NewList returns an empty list of kind, nil for a kind that is not CAPTF's.
func NewList(kind string) client.ObjectList {
	if k, ok := captfv1.LookupKind(kind); ok {
		return k.NewList()
	}
	return nil
}

// Lists are empty lists of every kind, for completion and block-move checks.
func Lists() []client.ObjectList {
	out := make([]client.ObjectList, len(captfv1.Kinds))
	for i, k := range captfv1.Kinds {
		out[i] = k.NewList()
	}
	return out
}

// ParseKind returns the kind a user typed (any alias, case-insensitive), or "".
func ParseKind(s string) string {
	s = strings.ToLower(s)
	if i := strings.Index(s, "."); i > 0 {
		s = s[:i] // terraformclusters.infrastructure.cluster.x-k8s.io
	}
	for _, k := range captfv1.Kinds {
		if slices.Contains(k.Aliases(), s) {
			return k.Kind
		}
	}
	return ""
}

// kindChoices names every kind as users may type it: "terraformcluster (tfc), ... or ...".
func kindChoices() string {
	var out []string
	for _, k := range captfv1.Kinds {
		out = append(out, k.Resource+" ("+k.ShortName+")")
	}
	return strings.Join(out[:len(out)-1], ", ") + " or " + out[len(out)-1]
}

// ErrNotFound is returned when an argument names nothing.
var ErrNotFound = errors.New("not found")

// Get resolves arg, "NAME" or "KIND/NAME", to the CAPTF object in namespace. A bare name that
// more than one kind has is an error that says how to choose.
func Get(ctx context.Context, c client.Reader, namespace, arg string) (*Object, error) {
	kinds := captfv1.Kinds
	name := arg
	if k, n, ok := strings.Cut(arg, "/"); ok {
		kind, ok := captfv1.LookupKind(ParseKind(k))
		if !ok {
			return nil, fmt.Errorf("%q is not a CAPTF kind: use %s", k, kindChoices())
		}
		kinds, name = []captfv1.KindInfo{kind}, n
	}
	var found []*Object
	for _, k := range kinds {
		obj := k.New()
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s %s/%s: %w", k.Kind, namespace, name, err)
		}
		found = append(found, Wrap(obj))
	}
	switch len(found) {
	case 0:
		var lists []client.ObjectList
		for _, k := range kinds {
			lists = append(lists, k.NewList())
		}
		return nil, fmt.Errorf("no TerraformCluster, TerraformMachinePool or TerraformMachine %q in namespace %s %s: %w",
			arg, namespace, cmdutil.NamespaceHint(namespace, cmdutil.Elsewhere(ctx, c, namespace, name, lists...)), ErrNotFound)
	case 1:
		return found[0], nil
	}
	var refs []string
	for _, o := range found {
		refs = append(refs, strings.ToLower(o.Kind)+"/"+name)
	}
	return nil, fmt.Errorf("%q names %d objects: say which, e.g. %s", arg, len(found), strings.Join(refs, " or "))
}

// List returns the CAPTF objects in namespace ("" for all) matching opts, in tree order: by
// kind (cluster, pools, machines), then namespace and name.
func List(ctx context.Context, c client.Reader, namespace string, opts ...client.ListOption) ([]*Object, error) {
	var out []*Object
	for _, k := range captfv1.Kinds {
		l := k.NewList()
		lo := append([]client.ListOption{client.InNamespace(namespace)}, opts...)
		if err := c.List(ctx, l, lo...); err != nil {
			return nil, fmt.Errorf("list %ss: %w", k.Kind, err)
		}
		start := len(out)
		for _, item := range l.WorkspaceItems() {
			out = append(out, Wrap(item))
		}
		part := out[start:]
		sort.Slice(part, func(i, j int) bool {
			if part[i].Namespace() != part[j].Namespace() {
				return part[i].Namespace() < part[j].Namespace()
			}
			return part[i].Name() < part[j].Name()
		})
	}
	return out, nil
}

// OfCluster lists the CAPTF objects of a CAPI Cluster (by the cluster-name label).
func OfCluster(ctx context.Context, c client.Reader, namespace, cluster string) ([]*Object, error) {
	return List(ctx, c, namespace, client.MatchingLabels{clusterv1.ClusterNameLabel: cluster})
}

// Plans lists TerraformPlans in namespace ("" for all), newest first.
func Plans(ctx context.Context, c client.Reader, namespace string, opts ...client.ListOption) ([]captfv1.TerraformPlan, error) {
	var list captfv1.TerraformPlanList
	if err := c.List(ctx, &list, append([]client.ListOption{client.InNamespace(namespace)}, opts...)...); err != nil {
		return nil, fmt.Errorf("list TerraformPlans: %w", err)
	}
	sort.SliceStable(list.Items, func(i, j int) bool {
		a, b := list.Items[i].CreationTimestamp, list.Items[j].CreationTimestamp
		if !a.Equal(&b) {
			return b.Before(&a)
		}
		return list.Items[i].Name < list.Items[j].Name
	})
	return list.Items, nil
}

// Phase is a plan's phase: its label (which survives clusterctl move), else its status.
func Phase(tp *captfv1.TerraformPlan) captfv1.PlanPhase {
	if p := tp.Labels[captfv1.PlanPhaseLabel]; p != "" {
		return captfv1.PlanPhase(p)
	}
	return tp.Status.Phase
}

// PlansOf lists the TerraformPlans of an object, newest first.
func PlansOf(ctx context.Context, c client.Reader, o *Object) ([]captfv1.TerraformPlan, error) {
	all, err := Plans(ctx, c, o.Namespace(), o.Owner().Selector())
	if err != nil {
		return nil, err
	}
	var out []captfv1.TerraformPlan
	for _, tp := range all {
		if tp.Spec.TargetRef.Kind == o.Kind && tp.Spec.TargetRef.Name == o.Name() {
			out = append(out, tp)
		}
	}
	return out, nil
}

// GetPlan resolves arg to a TerraformPlan: a plan's name, or an object (NAME or KIND/NAME)
// whose pending plan (status.pendingPlanRef, else its newest Pending or Approved plan) it
// means. target is the object when arg named one.
func GetPlan(ctx context.Context, c client.Reader, namespace, arg string) (tp *captfv1.TerraformPlan, target *Object, err error) {
	if !strings.Contains(arg, "/") {
		tp = &captfv1.TerraformPlan{}
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: arg}, tp)
		if err == nil {
			return tp, nil, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("read TerraformPlan %s/%s: %w", namespace, arg, err)
		}
	} else if k, n, _ := strings.Cut(arg, "/"); strings.EqualFold(k, "terraformplan") || strings.EqualFold(k, "tfplan") || strings.EqualFold(k, "terraformplans") {
		tp = &captfv1.TerraformPlan{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: n}, tp); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil, fmt.Errorf("no TerraformPlan %q in namespace %s %s: %w", n, namespace,
					cmdutil.NamespaceHint(namespace, cmdutil.Elsewhere(ctx, c, namespace, n, &captfv1.TerraformPlanList{})), ErrNotFound)
			}
			return nil, nil, err
		}
		return tp, nil, nil
	}
	o, err := Get(ctx, c, namespace, arg)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			lists := append([]client.ObjectList{&captfv1.TerraformPlanList{}}, Lists()...)
			name := arg[strings.LastIndex(arg, "/")+1:]
			return nil, nil, fmt.Errorf("no TerraformPlan and no CAPTF object %q in namespace %s %s: %w", arg, namespace,
				cmdutil.NamespaceHint(namespace, cmdutil.Elsewhere(ctx, c, namespace, name, lists...)), ErrNotFound)
		}
		return nil, nil, err
	}
	plans, err := PlansOf(ctx, c, o)
	if err != nil {
		return nil, o, err
	}
	if ref := o.Status.PendingPlanRef; ref != nil {
		for i := range plans {
			if plans[i].Name == ref.Name {
				return &plans[i], o, nil
			}
		}
	}
	for i := range plans {
		if p := Phase(&plans[i]); p == captfv1.PlanPending || p == captfv1.PlanApproved {
			return &plans[i], o, nil
		}
	}
	return nil, o, fmt.Errorf("%s has no pending plan: %w", o.Ref(), ErrNotFound)
}

// Condition returns the condition of type t, or nil.
func Condition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
