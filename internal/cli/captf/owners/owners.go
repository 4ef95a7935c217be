// Package owners finds the Secrets and TerraformPlans of CAPTF objects whose owner reference is
// missing or names a UID that no longer exists (after a restore from backup, Velero, or a hand
// edit), and repairs them. `owners check` and `owners repair` are its two commands.
package owners

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/planview"
	"github.com/capx-io/capx/internal/captf/savedplan"
	"github.com/capx-io/capx/internal/cli/captf/objects"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// Finding is one object whose owner reference is wrong.
type Finding struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// What it is: state, state backup, inputs, plan key, plan, plan view, saved plan, Secret.
	What string `json:"what"`
	// Owner is the CAPTF object (Kind/name) it belongs to.
	Owner string `json:"owner"`
	// Problem says what is wrong.
	Problem string `json:"problem"`
	// Repaired is set by Repair.
	Repaired bool `json:"repaired,omitempty"`

	obj     client.Object
	want    metav1.OwnerReference
	dropUID types.UID
}

// Report is the printed shape of both commands (kind OwnerReferenceReport).
type Report struct {
	cmdutil.TypeMeta `json:",inline"`
	// Namespace is where the objects were checked ("" with -A: every namespace).
	Namespace string    `json:"namespace"`
	Cluster   string    `json:"cluster,omitempty"`
	Checked   int       `json:"checked"`
	DryRun    bool      `json:"dryRun"`
	Findings  []Finding `json:"findings"`
}

func what(kind, name string) string {
	if kind == "TerraformPlan" {
		return "plan"
	}
	for _, p := range []struct{ prefix, what string }{
		{"tfstate-default-", "state"}, {"captf-state-backup-", "state backup"}, {"captf-inputs-", "inputs"},
		{"captf-plankey-", "plan key"}, {"captf-planview-", "plan view"}, {"captf-savedplan-", "saved plan"},
		{"captf-creds-", "credentials"},
	} {
		if strings.HasPrefix(name, p.prefix) {
			return p.what
		}
	}
	return "Secret"
}

// Find checks the Secrets and TerraformPlans that belong to objs (by the manager's owner
// labels) and returns those whose owner reference to the object is missing or stale. It
// returns how many it checked. Retained state (captf.io/retained-from-uid) and per-run Secrets
// owned by a Job are left alone: they are meant to have no, or another, owner.
func Find(ctx context.Context, c client.Reader, objs []*objects.Object) ([]Finding, int, error) {
	var out []Finding
	checked := 0
	for _, o := range objs {
		plans, err := objects.PlansOf(ctx, c, o)
		if err != nil {
			return nil, checked, err
		}
		planUID := map[string]types.UID{}
		for _, tp := range plans {
			planUID[tp.Name] = tp.UID
		}
		objRef := ownerRef(o)
		for i := range plans {
			checked++
			tp := &plans[i]
			want := objRef
			want.Controller, want.BlockOwnerDeletion = ptrTrue(), ptrTrue()
			if f, bad := judge(o, tp, "TerraformPlan", want, nil); bad {
				out = append(out, f)
			}
		}
		var secrets corev1.SecretList
		if err := c.List(ctx, &secrets, client.InNamespace(o.Namespace()), o.Owner().Selector()); err != nil {
			return nil, checked, fmt.Errorf("list the Secrets of %s: %w", o.Ref(), err)
		}
		for i := range secrets.Items {
			s := &secrets.Items[i]
			if s.Labels[captfv1.RetainedFromUIDLabel] != "" || ownedByJob(s) {
				continue
			}
			checked++
			var alt *metav1.OwnerReference
			if plan := s.Annotations[planview.PlanAnnotation]; plan != "" && (s.Labels[planview.Label] == "true" || s.Labels[savedplan.Label] == "true") {
				// A plan view and a saved plan belong to their TerraformPlan once the manager
				// hands them over.
				if uid, ok := planUID[plan]; ok {
					alt = &metav1.OwnerReference{APIVersion: captfv1.GroupVersion.String(), Kind: "TerraformPlan", Name: plan, UID: uid}
				}
			}
			if f, bad := judge(o, s, "Secret", objRef, alt); bad {
				out = append(out, f)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Owner != out[j].Owner {
			return out[i].Owner < out[j].Owner
		}
		return out[i].Name < out[j].Name
	})
	return out, checked, nil
}

func ptrTrue() *bool { t := true; return &t }

func ownerRef(o *objects.Object) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: captfv1.GroupVersion.String(), Kind: o.Kind, Name: o.Name(), UID: o.Obj.GetUID()}
}

func ownedByJob(o client.Object) bool {
	for _, r := range o.GetOwnerReferences() {
		if r.Kind == "Job" {
			return true
		}
	}
	return false
}

func sameKind(r metav1.OwnerReference, want metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	wgv, _ := schema.ParseGroupVersion(want.APIVersion)
	return err == nil && gv.Group == wgv.Group && r.Kind == want.Kind && r.Name == want.Name
}

// judge returns a finding when obj has no owner reference to want (or alt) with the right UID.
func judge(o *objects.Object, obj client.Object, kind string, want metav1.OwnerReference, alt *metav1.OwnerReference) (Finding, bool) {
	f := Finding{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), What: what(kind, obj.GetName()), Owner: o.Ref(), obj: obj, want: want}
	for _, r := range obj.GetOwnerReferences() {
		for _, w := range []*metav1.OwnerReference{&want, alt} {
			if w == nil || !sameKind(r, *w) {
				continue
			}
			if r.UID == w.UID {
				return f, false
			}
			f.Problem = fmt.Sprintf("owner reference to %s/%s names UID %s; the %s is now UID %s", w.Kind, w.Name, r.UID, w.Kind, w.UID)
			f.dropUID = r.UID
			if w == alt {
				f.want = *alt
			}
			return f, true
		}
	}
	f.Problem = "no owner reference to " + o.Ref()
	if alt != nil {
		f.want = *alt
		f.Problem = fmt.Sprintf("no owner reference to TerraformPlan %s or %s", alt.Name, o.Ref())
	}
	return f, true
}

// Repair sets each finding's owner reference (dropping the stale one), guarded by the
// object's resourceVersion. It stops at the first error.
func Repair(ctx context.Context, c client.Client, findings []Finding) error {
	for i := range findings {
		f := &findings[i]
		patch := client.MergeFromWithOptions(f.obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
		var refs []metav1.OwnerReference
		for _, r := range f.obj.GetOwnerReferences() {
			if sameKind(r, f.want) {
				continue
			}
			refs = append(refs, r)
		}
		refs = append(refs, f.want)
		f.obj.SetOwnerReferences(refs)
		if err := c.Patch(ctx, f.obj, patch); err != nil {
			if apierrors.IsConflict(err) {
				return fmt.Errorf("%s %s changed while repairing; run the command again: %w", f.Kind, f.Name, err)
			}
			return fmt.Errorf("repair the owner reference of %s %s: %w", f.Kind, f.Name, err)
		}
		f.Repaired = true
	}
	return nil
}

// Scope resolves the objects to check: those of cluster, or all in namespace ("" for every
// namespace).
func Scope(ctx context.Context, c client.Reader, namespace, cluster string) ([]*objects.Object, error) {
	if cluster != "" {
		objs, err := objects.OfCluster(ctx, c, namespace, cluster)
		if err == nil && len(objs) == 0 {
			return nil, cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("no CAPTF objects of Cluster %s in namespace %s %s", cluster, namespace,
				cmdutil.NamespaceHint(namespace, cmdutil.Elsewhere(ctx, c, namespace, cluster, &clusterv1.ClusterList{}))))
		}
		return objs, err
	}
	return objects.List(ctx, c, namespace)
}

// Render prints a report.
func Render(r Report, st *cmdutil.Styles, w interface{ Write([]byte) (int, error) }, name string) {
	if len(r.Findings) == 0 {
		fmt.Fprintf(w, "%s all %d Secrets and TerraformPlans checked have their owner references.\n", st.OK("OK"), r.Checked)
		return
	}
	for _, f := range r.Findings {
		mark := st.Bad("BROKEN")
		if f.Repaired {
			mark = st.OK("FIXED ")
		}
		fmt.Fprintf(w, "%s  %s %s (%s of %s): %s\n", mark, f.Kind, f.Name, f.What, f.Owner, f.Problem)
	}
	repaired := 0
	for _, f := range r.Findings {
		if f.Repaired {
			repaired++
		}
	}
	scope := " -n " + r.Namespace
	switch {
	case r.Cluster != "":
		scope = " " + r.Cluster + scope
	case r.Namespace == "":
		scope = " -A"
	}
	switch {
	case repaired == len(r.Findings):
		fmt.Fprintf(w, "\nRepaired %d of %d checked.\n", repaired, r.Checked)
	case r.DryRun:
		fmt.Fprintf(w, "\n%d of %d checked need repair; nothing was changed (dry run). Repair them with: %s owners repair%s --yes\n",
			len(r.Findings), r.Checked, name, scope)
	default:
		fmt.Fprintf(w, "\n%d of %d checked need repair. Repair them with: %s owners repair%s --yes\n",
			len(r.Findings), r.Checked, name, scope)
	}
}

// Run finds the broken owner references of the objects of the scope (a cluster, the namespace,
// or with -A every namespace), repairs them when repair is set, and prints the report.
// Something found and left broken returns cmdutil.ErrFound (exit 1).
func Run(ctx context.Context, d cmdutil.Deps, st *cmdutil.Styles, scope cmdutil.ClusterScope, output cmdutil.Format, repair bool) error {
	c, ns, err := d.ConnectScope(scope.AllNamespaces)
	if err != nil {
		return err
	}
	cluster := scope.Cluster
	objs, err := Scope(ctx, c, ns, cluster)
	if err != nil {
		return err
	}
	findings, checked, err := Find(ctx, c, objs)
	if err != nil {
		return err
	}
	var rerr error
	if repair {
		rerr = Repair(ctx, c, findings)
	}
	r := Report{TypeMeta: cmdutil.Meta("OwnerReferenceReport"), Namespace: ns, Cluster: cluster, Checked: checked, DryRun: !repair, Findings: findings}
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	if err := cmdutil.Print(d.IO.Out, output, r, func() error {
		Render(r, st, d.IO.Out, d.Name)
		return nil
	}); err != nil {
		return err
	}
	if rerr != nil {
		return rerr
	}
	if !repair && len(findings) > 0 {
		return cmdutil.ErrFound
	}
	return nil
}
