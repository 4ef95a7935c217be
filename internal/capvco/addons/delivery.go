package addons

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/capvco/sriov"
)

// Labels and annotations on every object Delivery applies.
const (
	// NameLabel is the add-on an object belongs to; what an add-on no longer renders is found by
	// it and deleted.
	NameLabel = "addons.capvco.io/name"
	// VersionAnnotation is the manager version that applied the object.
	VersionAnnotation = "addons.capvco.io/version"
	// FieldOwner is the server-side apply field manager.
	FieldOwner = "capvco-manager"
)

// Delivery applies a Registry's add-ons to workload clusters.
type Delivery struct {
	// Management reads the Secrets of the management cluster: the kubeconfig Cluster API writes,
	// and those the add-ons copy.
	Management client.Reader
	// Registry is the add-ons.
	Registry Registry
	// Manager is the manager's part of the settings (Version, ImageRepository, Images, Platform).
	Manager Settings
	// Connect builds a client of the workload cluster; nil means from the kubeconfig.
	Connect func(kubeconfig []byte) (client.Client, error)
	// Resync is how often an add-on that is applied and available is checked again (default
	// decide.DefaultAddonResync); Poll how soon one that is not (default decide.DefaultAddonPoll).
	Resync, Poll time.Duration
}

// Target is the cluster to deliver to.
type Target struct {
	VCOCluster  *capvcov1.VCOCluster
	ClusterName string
}

// Observed is what one delivery pass found.
type Observed struct {
	// Waiting says why nothing was delivered ("" when the workload cluster was reachable or
	// nothing was due).
	Waiting string
	// Addons are the registry's add-ons, in order.
	Addons []Outcome
	// Requeue is when the delivery is due again.
	Requeue time.Duration
}

// Outcome is one add-on in one pass.
type Outcome struct {
	Name string
	// Skip: the cluster does not want it, and why.
	Skip string
	// Version and Hash of what is applied: this pass's when Checked, else the record's.
	Version, Hash string
	// Checked: the workload cluster was asked this pass (applied when Applied).
	Checked, Applied bool
	// Available: every Deployment and DaemonSet of the add-on has its replicas available.
	Available bool
	// Unavailable names those that do not, with their counts.
	Unavailable []string
	// DaemonSets are the add-on's DaemonSets as read back when Checked (key namespace/name),
	// for the conditions that say more than availability (SRIOVAgentReady).
	DaemonSets map[string]*appsv1.DaemonSet
	// Removing: the cluster no longer wants an add-on that was delivered to it, and what was
	// applied is to be deleted; Removed once it was this pass.
	Removing, Removed bool
	// NotServed names the objects not applied because the workload cluster does not serve
	// their kind (a VolumeSnapshotClass without the snapshot CRDs): the rest of the add-on works
	// without them, and they are applied once the kind is served.
	NotServed []string
	// Err is why the add-on is not applied (render, Secret, apply) or could not be checked.
	Err error
}

// Reconcile delivers every add-on that is due to the target. It never fails the caller: every
// problem is in the outcome of the add-on it concerns.
func (d *Delivery) Reconcile(ctx context.Context, t Target, now time.Time) Observed {
	s := d.Manager
	s.VCOCluster, s.ClusterName = t.VCOCluster, t.ClusterName
	s.ControlPlaneReplicas = d.controlPlaneReplicas(ctx, t)
	obs := Observed{}
	var due []int
	var rendered []Rendered
	for i, a := range d.Registry {
		out := Outcome{Name: a.Name()}
		r, err := a.Render(s)
		switch {
		case err != nil:
			out.Err = fmt.Errorf("render: %w", err)
		case r.Skip != "":
			out.Skip = r.Skip
			if len(r.Remove) > 0 && recorded(t.VCOCluster, out.Name) != nil {
				out.Removing = true
				due = append(due, i)
			}
		default:
			hash, herr := d.hash(ctx, t, r)
			out.Hash, out.Version, out.Err = hash, s.Version, herr
			rec := recorded(t.VCOCluster, out.Name)
			if herr == nil && decide.AddonDue(rec, hash, d.resync(), now) {
				due = append(due, i)
			} else if herr == nil {
				out.Available, out.Version = rec.Available, rec.Version
			}
		}
		obs.Addons = append(obs.Addons, out)
		rendered = append(rendered, r)
	}
	obs.Requeue = d.requeue(t.VCOCluster, obs, now)
	if len(due) == 0 {
		return obs
	}
	wl, err := d.workload(ctx, t)
	if err != nil || wl == nil {
		obs.Waiting = waitingFor(t, err)
		for _, i := range due {
			obs.Addons[i].Err = err
		}
		obs.Requeue = d.poll()
		return obs
	}
	for _, i := range due {
		if obs.Addons[i].Removing {
			d.remove(ctx, wl, rendered[i], &obs.Addons[i])
			continue
		}
		d.deliver(ctx, wl, t, rendered[i], &obs.Addons[i])
		if !obs.Addons[i].Available {
			obs.Requeue = min(obs.Requeue, d.poll())
		}
	}
	return obs
}

// controlPlaneReplicas reads how many control-plane machines the target's Cluster wants; 0
// when the Cluster cannot be read or Cluster API has not said yet (the add-ons then render
// their defaults, and apply again once it has).
func (d *Delivery) controlPlaneReplicas(ctx context.Context, t Target) int32 {
	c := &clusterv1.Cluster{}
	if err := d.Management.Get(ctx, client.ObjectKey{Namespace: t.VCOCluster.Namespace, Name: t.ClusterName}, c); err != nil || c.Status.ControlPlane == nil {
		return 0
	}
	return ptr.Deref(c.Status.ControlPlane.DesiredReplicas, 0)
}

func waitingFor(t Target, err error) string {
	if err != nil {
		return ""
	}
	return fmt.Sprintf("the workload cluster's kubeconfig Secret %s-kubeconfig does not exist yet (Cluster API writes it once the control plane is initialized)", t.ClusterName)
}

// requeue is when the next pass is due: the earliest recorded check's resync.
func (d *Delivery) requeue(vc *capvcov1.VCOCluster, obs Observed, now time.Time) time.Duration {
	next := d.resync()
	for _, o := range obs.Addons {
		if o.Err != nil || o.Removing || (o.Skip == "" && !o.Available) {
			return d.poll()
		}
		if rec := recorded(vc, o.Name); rec != nil && rec.CheckedAt != nil {
			next = min(next, max(rec.CheckedAt.Add(d.resync()).Sub(now), time.Second))
		}
	}
	return next
}

func (d *Delivery) resync() time.Duration {
	if d.Resync > 0 {
		return d.Resync
	}
	return decide.DefaultAddonResync
}

func (d *Delivery) poll() time.Duration {
	if d.Poll > 0 {
		return d.Poll
	}
	return decide.DefaultAddonPoll
}

func recorded(vc *capvcov1.VCOCluster, name string) *capvcov1.AddonStatus {
	for i := range vc.Status.Addons {
		if vc.Status.Addons[i].Name == name {
			return &vc.Status.Addons[i]
		}
	}
	return nil
}

// hash is what decides whether an add-on is applied again: its objects, and the source and
// resourceVersion of each Secret it copies (never a Secret's contents).
func (d *Delivery) hash(ctx context.Context, t Target, r Rendered) (string, error) {
	h := sha256.New()
	for _, o := range r.Objects {
		b, err := json.Marshal(o.Object)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	for _, sc := range r.Secrets {
		src, err := d.source(ctx, t, sc)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "\x00%s/%s<-%s@%s", sc.Namespace, sc.Name, sc.From, src.ResourceVersion)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// source reads a copied Secret's source; its error names the Secret and the spec field.
func (d *Delivery) source(ctx context.Context, t Target, sc SecretCopy) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := d.Management.Get(ctx, client.ObjectKey{Namespace: t.VCOCluster.Namespace, Name: sc.From}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("Secret %s/%s (%s) does not exist", t.VCOCluster.Namespace, sc.From, sc.Field)
		}
		return nil, fmt.Errorf("read Secret %s/%s (%s): %w", t.VCOCluster.Namespace, sc.From, sc.Field, err)
	}
	var missing []string
	for _, k := range sc.Required {
		if len(s.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("Secret %s/%s (%s) lacks the keys %v", t.VCOCluster.Namespace, sc.From, sc.Field, missing)
	}
	if sc.NotSameAs != "" {
		other := &corev1.Secret{}
		err := d.Management.Get(ctx, client.ObjectKey{Namespace: t.VCOCluster.Namespace, Name: sc.NotSameAs}, other)
		switch {
		case err == nil && (sc.NotSameAs == sc.From || sriov.SameCredential(s.Data, other.Data)):
			return nil, fmt.Errorf("Secret %s/%s (%s) holds the same credential as %s, which this add-on may not get: use a credential scoped to the cluster's cloudspaces",
				t.VCOCluster.Namespace, sc.From, sc.Field, sc.NotSameAs)
		case err != nil && !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("read Secret %s/%s, to tell it from %s: %w", t.VCOCluster.Namespace, sc.NotSameAs, sc.Field, err)
		}
	}
	return s, nil
}

// workload is a client of the target's workload cluster; nil (no error) while Cluster API has
// not written its kubeconfig yet.
func (d *Delivery) workload(ctx context.Context, t Target) (client.Client, error) {
	cfg, err := kubeconfig.FromSecret(ctx, d.Management, client.ObjectKey{Namespace: t.VCOCluster.Namespace, Name: t.ClusterName})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the workload cluster's kubeconfig Secret %s-kubeconfig: %w", t.ClusterName, err)
	}
	if d.Connect != nil {
		return d.Connect(cfg)
	}
	return Connect(cfg)
}

// Connect is the default Delivery.Connect: a client of the kubeconfig's cluster.
func Connect(kubeconfig []byte) (client.Client, error) {
	rc, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("the workload cluster's kubeconfig: %w", err)
	}
	rc.Timeout = 30 * time.Second
	return client.New(rc, client.Options{Scheme: workloadScheme})
}

var workloadScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	return s
}()

// deliver copies the add-on's Secrets, applies its objects, deletes what it no longer renders
// and reads its workloads' availability.
func (d *Delivery) deliver(ctx context.Context, wl client.Client, t Target, r Rendered, out *Outcome) {
	log := logr.FromContextOrDiscard(ctx).WithValues("addon", out.Name, "version", out.Version)
	out.Checked = true
	// Namespaces first: the copied Secrets may live in one the add-on creates.
	isNamespace := func(o *unstructured.Unstructured) bool { return o.GroupVersionKind() == namespaceKind }
	if out.Err = d.apply(ctx, wl, r.Objects, isNamespace, out); out.Err != nil {
		return
	}
	for _, sc := range r.Secrets {
		if out.Err = d.copySecret(ctx, wl, t, sc, out.Name); out.Err != nil {
			return
		}
	}
	notNamespace := func(o *unstructured.Unstructured) bool { return !isNamespace(o) }
	if out.Err = d.apply(ctx, wl, r.Objects, notNamespace, out); out.Err != nil {
		return
	}
	log.Info("Applied add-on to the workload cluster", "objects", len(r.Objects))
	out.Applied = true
	if out.Err = d.prune(ctx, wl, r, out.Name, log); out.Err != nil {
		return
	}
	out.Err = availability(ctx, wl, r, out)
}

var (
	namespaceKind = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	secretKind    = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
)

// apply applies, in order, the objects which, labelled with the add-on's name and version.
func (d *Delivery) apply(ctx context.Context, wl client.Client, objs []*unstructured.Unstructured, which func(*unstructured.Unstructured) bool, out *Outcome) error {
	for _, o := range objs {
		if !which(o) {
			continue
		}
		o = o.DeepCopy()
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[NameLabel] = out.Name
		o.SetLabels(labels)
		ann := o.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[VersionAnnotation] = out.Version
		o.SetAnnotations(ann)
		err := wl.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(FieldOwner), client.ForceOwnership)
		switch {
		case meta.IsNoMatchError(err):
			out.NotServed = append(out.NotServed, fmt.Sprintf("%s %s (the cluster does not serve %s)", o.GetKind(), objectName(o), o.GetAPIVersion()))
		case err != nil:
			return fmt.Errorf("apply %s %s: %w", o.GetKind(), objectName(o), err)
		}
	}
	return nil
}

// remove deletes what the add-on applied and copied from a cluster that no longer wants it:
// every object of its kinds (and every Secret) that carries its label.
func (d *Delivery) remove(ctx context.Context, wl client.Client, r Rendered, out *Outcome) {
	log := logr.FromContextOrDiscard(ctx).WithValues("addon", out.Name)
	out.Checked = true
	for _, gvk := range append(slices.Clone(r.Remove), secretKind) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		err := wl.List(ctx, list, client.MatchingLabels{NameLabel: out.Name})
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			out.Err = fmt.Errorf("list %s of the add-on, to remove them: %w", gvk.Kind, err)
			return
		}
		for i := range list.Items {
			o := &list.Items[i]
			if err := wl.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				out.Err = fmt.Errorf("delete %s %s of the add-on the cluster no longer asks for: %w", gvk.Kind, objectName(o), err)
				return
			}
			log.Info("Deleted an object of an add-on the cluster no longer asks for", gvk.Kind, klog.KObj(o))
		}
	}
	out.Removed = true
}

// Kinds are the kinds of objects, in order of first appearance: what Rendered.Remove names.
func Kinds(objs []*unstructured.Unstructured) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, o := range objs {
		if gvk := o.GroupVersionKind(); !slices.Contains(out, gvk) {
			out = append(out, gvk)
		}
	}
	return out
}

func objectName(o client.Object) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

// copySecret writes the workload Secret with exactly the copied keys.
func (d *Delivery) copySecret(ctx context.Context, wl client.Client, t Target, sc SecretCopy, addon string) error {
	src, err := d.source(ctx, t, sc)
	if err != nil {
		return err
	}
	data := map[string][]byte{}
	for _, k := range sc.Keys {
		if v, ok := src.Data[k]; ok {
			data[k] = v
		}
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Secret")
	u.SetNamespace(sc.Namespace)
	u.SetName(sc.Name)
	u.SetLabels(map[string]string{NameLabel: addon})
	u.Object["data"] = toJSON(data)
	u.Object["type"] = string(corev1.SecretTypeOpaque)
	if err := wl.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("write Secret %s/%s (a copy of %s): %w", sc.Namespace, sc.Name, sc.Field, err)
	}
	return nil
}

// toJSON is a Secret's data in its JSON form (base64 strings).
func toJSON(data map[string][]byte) map[string]any {
	b, _ := json.Marshal(data)
	out := map[string]any{}
	_ = json.Unmarshal(b, &out)
	return out
}

// prune deletes the add-on's objects of the kinds it renders that it no longer renders.
func (d *Delivery) prune(ctx context.Context, wl client.Client, r Rendered, addon string, log logr.Logger) error {
	keep := map[string]bool{}
	var kinds []schema.GroupVersionKind
	for _, o := range r.Objects {
		gvk := o.GroupVersionKind()
		keep[gvk.String()+"|"+objectName(o)] = true
		if !slices.Contains(kinds, gvk) {
			kinds = append(kinds, gvk)
		}
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].String() < kinds[j].String() })
	for _, gvk := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		err := wl.List(ctx, list, client.MatchingLabels{NameLabel: addon})
		if meta.IsNoMatchError(err) {
			continue // nothing of a kind the cluster does not serve can be there
		}
		if err != nil {
			return fmt.Errorf("list %s of the add-on: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			o := &list.Items[i]
			if keep[gvk.String()+"|"+objectName(o)] {
				continue
			}
			if err := wl.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete %s %s, which the add-on no longer has: %w", gvk.Kind, objectName(o), err)
			}
			log.Info("Deleted an object the add-on no longer has", gvk.Kind, klog.KObj(o))
		}
	}
	return nil
}

// availability reads the add-on's Deployments and DaemonSets: available when each has observed
// its current generation and has every replica updated and available.
func availability(ctx context.Context, wl client.Client, r Rendered, out *Outcome) error {
	var unavailable []string
	for _, o := range r.Objects {
		key := client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetName()}
		switch o.GetKind() {
		case "Deployment":
			dep := &appsv1.Deployment{}
			if err := wl.Get(ctx, key, dep); err != nil {
				return fmt.Errorf("read Deployment %s: %w", key, err)
			}
			want := int32(1)
			if dep.Spec.Replicas != nil {
				want = *dep.Spec.Replicas
			}
			st := dep.Status
			if st.ObservedGeneration < dep.Generation || st.UpdatedReplicas < want || st.AvailableReplicas < want {
				unavailable = append(unavailable, fmt.Sprintf("Deployment %s: %d/%d available", key, st.AvailableReplicas, want))
			}
		case "DaemonSet":
			ds := &appsv1.DaemonSet{}
			if err := wl.Get(ctx, key, ds); err != nil {
				return fmt.Errorf("read DaemonSet %s: %w", key, err)
			}
			if out.DaemonSets == nil {
				out.DaemonSets = map[string]*appsv1.DaemonSet{}
			}
			out.DaemonSets[key.String()] = ds
			st := ds.Status
			if st.ObservedGeneration < ds.Generation || st.UpdatedNumberScheduled < st.DesiredNumberScheduled || st.NumberAvailable < st.DesiredNumberScheduled {
				unavailable = append(unavailable, fmt.Sprintf("DaemonSet %s: %d/%d available", key, st.NumberAvailable, st.DesiredNumberScheduled))
			}
		}
	}
	out.Available, out.Unavailable = len(unavailable) == 0, unavailable
	return nil
}

// Records turns an observation into status.addons: the add-ons a cluster wants, as last
// checked (recorded are the entries status had).
func Records(obs *Observed, recorded []capvcov1.AddonStatus, now time.Time) []capvcov1.AddonStatus {
	var out []capvcov1.AddonStatus
	for _, o := range obs.Addons {
		i := slices.IndexFunc(recorded, func(r capvcov1.AddonStatus) bool { return r.Name == o.Name })
		if o.Skip != "" {
			// The record of a delivered add-on stays until what it applied is removed: it is
			// what says there is something to remove.
			if o.Removing && !o.Removed && i >= 0 {
				out = append(out, recorded[i])
			}
			continue
		}
		rec := capvcov1.AddonStatus{Name: o.Name}
		if i >= 0 {
			rec = recorded[i]
		}
		if o.Checked && o.Applied {
			t := metav1.NewTime(now)
			rec.Version, rec.Hash, rec.Available, rec.CheckedAt = o.Version, o.Hash, o.Available && o.Err == nil, &t
		}
		out = append(out, rec)
	}
	return out
}

// mustKinds is Kinds of an add-on's manifests rendered from fixed options (what a cluster that
// stops asking for it has of it): they render, or the package's tests fail.
func mustKinds(objs []*unstructured.Unstructured, err error) []schema.GroupVersionKind {
	if err != nil {
		panic(err)
	}
	return Kinds(objs)
}
