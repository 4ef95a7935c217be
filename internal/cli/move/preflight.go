package move

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Check is one preflight check's verdict.
type Check struct {
	// Name says what was checked, in a few words.
	Name string `json:"name"`
	// Passed is true when clusterctl move would not fail on it.
	Passed bool `json:"passed"`
	// Message explains a failure and what to do, or confirms a pass.
	Message string `json:"message"`
	// LeftBehind lists, for a check about what move carries, the objects it leaves on the
	// source.
	LeftBehind []LeftBehind `json:"leftBehind,omitempty"`
}

// LeftBehind is an object the moved objects read that clusterctl move does not carry.
type LeftBehind struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Reason says why move does not carry it.
	Reason string `json:"reason"`
	// OnTarget is true when a copy already exists on the target.
	OnTarget bool `json:"onTarget"`
}

func pass(name, format string, a ...any) Check {
	return Check{Name: name, Passed: true, Message: fmt.Sprintf(format, a...)}
}

func fail(name, format string, a ...any) Check {
	return Check{Name: name, Message: fmt.Sprintf(format, a...)}
}

// Target is the cluster being moved, read once on the source.
type Target struct {
	Namespace, Name string
	// Cluster is nil if it does not exist.
	Cluster *clusterv1.Cluster
}

// CheckCluster checks the Cluster itself as clusterctl move will: present, not deleting, not
// already paused (move pauses it and refuses one that is), infrastructure provisioned and
// control plane initialised, and every Machine with a node.
func CheckCluster(ctx context.Context, c client.Reader, t Target) []Check {
	const name = "cluster ready to move"
	cl := t.Cluster
	if cl == nil {
		return []Check{fail(name, "Cluster %s/%s not found", t.Namespace, t.Name)}
	}
	var checks []Check
	if !cl.DeletionTimestamp.IsZero() {
		checks = append(checks, fail("cluster not deleting", "Cluster %s is being deleted; let the deletion finish instead of moving it", t.Name))
	} else {
		checks = append(checks, pass("cluster not deleting", "Cluster %s is not being deleted", t.Name))
	}
	if ptr.Deref(cl.Spec.Paused, false) {
		checks = append(checks, fail("cluster not paused", "Cluster %s is paused; clusterctl move pauses it itself and refuses a paused Cluster: unpause it (kubectl patch cluster %s -n %s --type merge -p '{\"spec\":{\"paused\":false}}')", t.Name, t.Name, t.Namespace))
	} else {
		checks = append(checks, pass("cluster not paused", "Cluster %s is not paused", t.Name))
	}
	switch {
	case !ptr.Deref(cl.Status.Initialization.InfrastructureProvisioned, false):
		checks = append(checks, fail(name, "Cluster %s is still provisioning its infrastructure", t.Name))
	case !conditions.IsTrue(cl, clusterv1.ClusterControlPlaneInitializedCondition) ||
		(cl.Spec.ControlPlaneRef.IsDefined() && !ptr.Deref(cl.Status.Initialization.ControlPlaneInitialized, false)):
		checks = append(checks, fail(name, "the control plane of Cluster %s is not initialised yet", t.Name))
	default:
		checks = append(checks, pass(name, "infrastructure provisioned, control plane initialised"))
	}
	var machines clusterv1.MachineList
	if err := c.List(ctx, &machines, client.InNamespace(t.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: t.Name}); err != nil {
		return append(checks, fail("machines have nodes", "list Machines: %v", err))
	}
	var noNode []string
	for _, m := range machines.Items {
		if !m.Status.NodeRef.IsDefined() {
			noNode = append(noNode, m.Name)
		}
	}
	if len(noNode) > 0 {
		checks = append(checks, fail("machines have nodes", "%d Machine(s) still provisioning their node: %s", len(noNode), abbreviate(noNode)))
	} else {
		checks = append(checks, pass("machines have nodes", "%d Machine(s), all with a node", len(machines.Items)))
	}
	return checks
}

// CheckBlockMove checks that no object of the cluster in lists carries
// clusterctl.cluster.x-k8s.io/block-move: move waits for it to go (a provider sets it while
// it works, for CAPTF while a Job runs).
func CheckBlockMove(ctx context.Context, c client.Reader, t Target, lists ...client.ObjectList) Check {
	const name = "block-move clear"
	var blocked []string
	for _, l := range lists {
		l = l.DeepCopyObject().(client.ObjectList)
		if err := c.List(ctx, l, client.InNamespace(t.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: t.Name}); err != nil {
			return fail(name, "list objects: %v", err)
		}
		items, _ := meta.ExtractList(l)
		for _, it := range items {
			o := it.(client.Object)
			if _, ok := o.GetAnnotations()[clusterctlv1.BlockMoveAnnotation]; ok {
				blocked = append(blocked, kindOf(c, o)+"/"+o.GetName())
			}
		}
	}
	if len(blocked) > 0 {
		return fail(name, "%s carry %s: wait until the work they do finishes", abbreviate(blocked), clusterctlv1.BlockMoveAnnotation)
	}
	return pass(name, "no object of the cluster blocks the move")
}

func kindOf(c client.Reader, o client.Object) string {
	if k := o.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	if sc, ok := c.(client.Client); ok {
		if gvk, err := sc.GroupVersionKindFor(o); err == nil {
			return gvk.Kind
		}
	}
	return fmt.Sprintf("%T", o)
}

// CheckCRDs checks that each of p.CRDs is installed on side ("source" or "target") and
// carries the clusterctl.cluster.x-k8s.io label, without which clusterctl move does not see
// the kind at all and silently leaves its objects behind.
func CheckCRDs(ctx context.Context, c client.Reader, side string, p Provider, fix string) Check {
	name := "CRDs labelled on the " + side
	var missing, unlabelled []string
	for _, n := range p.CRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: n}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				missing = append(missing, n)
				continue
			}
			return fail(name, "read CRD %s: %v", n, err)
		}
		if _, ok := crd.Labels[clusterctlv1.ClusterctlLabel]; !ok {
			unlabelled = append(unlabelled, n)
		}
	}
	switch {
	case len(missing) > 0:
		return fail(name, "not installed on the %s: %s; install the provider there first", side, abbreviate(missing))
	case len(unlabelled) > 0:
		return fail(name, "%s lack the %s label, so clusterctl move would not move their objects; run %s", abbreviate(unlabelled), clusterctlv1.ClusterctlLabel, fix)
	}
	return pass(name, "%d CRDs carry %s", len(p.CRDs), clusterctlv1.ClusterctlLabel)
}

// CheckInventory checks the provider inventories as clusterctl move does: the source lists p,
// and every provider the source lists is on the target with the same name and type and a
// version at least the source's.
// fix and targetFix are the commands that register the provider on each side.
func CheckInventory(ctx context.Context, src, dst client.Reader, p Provider, fix, targetFix string) []Check {
	var checks []Check
	from, err := listProviders(ctx, src)
	if err != nil {
		return []Check{fail("inventory on the source", "%v", err)}
	}
	if !listsProvider(from, p) {
		checks = append(checks, fail("inventory on the source", "the source's clusterctl inventory does not list %s (%s): it was not installed with clusterctl init; run %s", p.ManifestLabel(), p.Namespace, fix))
	} else {
		checks = append(checks, pass("inventory on the source", "%d provider(s), %s among them", len(from), p.ManifestLabel()))
	}
	to, err := listProviders(ctx, dst)
	if err != nil {
		return append(checks, fail("inventory on the target", "%v", err))
	}
	var problems []string
	for _, s := range from {
		sv, err := utilversion.ParseSemantic(s.Version)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s/%s on the source has version %q, which clusterctl cannot parse", s.Namespace, s.Name, s.Version))
			continue
		}
		var best *utilversion.Version
		for _, d := range to {
			if !s.SameAs(d) {
				continue
			}
			if dv, err := utilversion.ParseSemantic(d.Version); err == nil && (best == nil || best.LessThan(dv)) {
				best = dv
			}
		}
		switch {
		case best == nil:
			problems = append(problems, fmt.Sprintf("%s not found", s.Name))
		case !best.AtLeast(sv):
			problems = append(problems, fmt.Sprintf("%s is %s, older than %s on the source", s.Name, best, s.Version))
		}
	}
	if len(problems) > 0 {
		checks = append(checks, fail("inventory on the target", "%s; install them on the target (clusterctl init, or run %s)", strings.Join(problems, "; "), targetFix))
	} else {
		checks = append(checks, pass("inventory on the target", "every provider of the source is on the target at the same version or newer"))
	}
	return checks
}

func listsProvider(ps []clusterctlv1.Provider, p Provider) bool {
	for _, x := range ps {
		if x.ProviderName == p.Name && x.Type == string(p.Type) {
			return true
		}
	}
	return false
}

func listProviders(ctx context.Context, c client.Reader) ([]clusterctlv1.Provider, error) {
	var list clusterctlv1.ProviderList
	if err := c.List(ctx, &list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list clusterctl Providers: %w", err)
	}
	return list.Items, nil
}

// CheckPresent checks that objs (typed, with namespace and name set), which move does not
// carry because nothing of the cluster owns them, exist on the target. what names them in the
// report ("credential Secrets").
func CheckPresent(ctx context.Context, dst client.Reader, what string, objs ...client.Object) Check {
	name := what + " on the target"
	var missing []string
	for _, o := range objs {
		key := client.ObjectKeyFromObject(o)
		if err := dst.Get(ctx, key, o); err != nil {
			if apierrors.IsNotFound(err) {
				missing = append(missing, key.String())
				continue
			}
			return fail(name, "read %s on the target: %v", key, err)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fail(name, "missing: %s; copy them to the target first (clusterctl move does not carry them)", abbreviate(missing))
	}
	return pass(name, "%d present", len(objs))
}

func abbreviate(names []string) string {
	const max = 5
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}
