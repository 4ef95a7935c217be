package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// variablesCache holds the metadata of the ConfigMaps and Secrets opted in as variablesFrom
// sources (label captf.io/variables=true), and nothing else: the manager's own cache keeps only
// the Secrets it manages, and the sources' content is read live when inputs are rendered. It
// exists so that a source created, fixed or opted in brings its objects back at once (an object
// waiting for its inputs has no requeue).
type variablesCache struct{ cache.Cache }

func newVariablesCache(mgr ctrl.Manager, namespace string) (variablesCache, error) {
	c, err := newSelectedCache(mgr, namespace, labels.SelectorFromSet(labels.Set{captfv1.VariablesLabel: "true"}))
	return variablesCache{c}, err
}

// newSelectedCache builds a cache of its own for the objects a label selector picks (in namespace, or
// everywhere), added to the manager so that it starts with the other caches.
func newSelectedCache(mgr ctrl.Manager, namespace string, selector labels.Selector) (cache.Cache, error) {
	opts := cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultLabelSelector: selector,
	}
	if namespace != "" {
		opts.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	c, err := cache.New(mgr.GetConfig(), opts)
	if err != nil {
		return nil, err
	}
	return c, mgr.Add(startsWithCaches{c})
}

// startsWithCaches makes the manager start a cache with its own, before the controllers.
type startsWithCaches struct{ cache.Cache }

func (c startsWithCaches) GetCache() cache.Cache { return c.Cache }

// watchVariables brings back the objects of a kind whose spec.variablesFrom names a ConfigMap
// or Secret that changed.
func watchVariables(vc variablesCache, c client.Client, list func() captfv1.WorkspaceList) func(*builder.Builder) *builder.Builder {
	return func(b *builder.Builder) *builder.Builder {
		for _, kind := range []string{"ConfigMap", "Secret"} {
			meta := &metav1.PartialObjectMetadata{}
			meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
			b = b.WatchesRawSource(source.Kind(vc, meta, handler.TypedEnqueueRequestsFromMapFunc(
				func(ctx context.Context, o *metav1.PartialObjectMetadata) []reconcile.Request {
					return objectsUsingVariables(ctx, c, list(), kind, o.Namespace, o.Name)
				})))
		}
		return b
	}
}

// objectsUsingVariables lists the objects of list's kind in a namespace whose variablesFrom
// names the ConfigMap or Secret.
func objectsUsingVariables(ctx context.Context, c client.Client, list captfv1.WorkspaceList, kind, namespace, name string) []reconcile.Request {
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, o := range list.WorkspaceItems() {
		spec, _ := o.Workspace()
		for _, src := range spec.VariablesFrom {
			if (kind == "ConfigMap" && src.ConfigMapRef != nil && src.ConfigMapRef.Name == name) ||
				(kind == "Secret" && src.SecretRef != nil && src.SecretRef.Name == name) {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
				break
			}
		}
	}
	return reqs
}
