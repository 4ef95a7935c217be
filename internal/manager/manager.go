// Package manager builds and runs the controller manager that reconciles both providers' kinds,
// and the `manager` command around it.
package manager

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	captfcontrollers "github.com/capx-io/capx/internal/captf/controllers"
	capvcocontrollers "github.com/capx-io/capx/internal/capvco/controllers"
	"github.com/capx-io/capx/internal/scheme"
)

// New builds a manager with every enabled provider's controllers registered, without starting
// it (tests start it themselves).
func New(ctx context.Context, cfg *rest.Config, o *Options) (ctrl.Manager, error) {
	syncPeriod := o.SyncPeriod
	managed := labels.SelectorFromSet(labels.Set{captfv1.ManagedLabel: "true"})
	cacheOpts := cache.Options{
		SyncPeriod: &syncPeriod,
		// The manager caches only the Secrets and Jobs it labels: a management cluster holds many
		// Secrets, and caching them all costs memory and widens what a leak would expose. Of
		// Secrets it caches only metadata (see Client below): any module can write Secrets with
		// the managed label. User Secrets (credentials, bootstrap data, variables), Pods and the
		// backend's lock Leases are read live through the API reader.
		// No cached object keeps its managedFields, and a Job whose result is recorded keeps no
		// Pod template (cachetransform.go): at fleet size the cached Jobs, and the copies every
		// list of them makes, were the largest part of the manager's heap (docs/benchmarks.md).
		DefaultTransform: stripManagedFields,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}:         {Label: managed},
			&batchv1.Job{}:           {Label: managed, Transform: trimJob},
			&corev1.ServiceAccount{}: {Label: managed},
			&rbacv1.RoleBinding{}:    {Label: managed},
			&coordinationv1.Lease{}:  {Label: managed},
		},
	}
	var identity string
	if o.Runs(ProviderCAPTF) {
		var err error
		if identity, err = whoAmI(ctx, cfg); err != nil {
			return nil, err
		}
	}
	if o.Namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{o.Namespace: {}}
		if o.DestroyNamespacePrefix != "" && o.Runs(ProviderCAPTF) {
			// The copies that destroy for objects deleted with the namespace live in its own
			// destroy namespace, named from its UID.
			dest, err := destroyNamespaceOf(ctx, cfg, o.Namespace, o.DestroyNamespacePrefix)
			if err != nil {
				return nil, err
			}
			cacheOpts.DefaultNamespaces[dest] = cache.Config{}
		}
	}
	// Secrets are read live, never from an informer holding their data; the metadata of managed
	// Secrets is cached (their watch brings objects back when a state changes).
	clientOpts := client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}}
	metricsAddr := o.MetricsAddr
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme.New(),
		Cache:                         cacheOpts,
		Client:                        clientOpts,
		Controller:                    config.Controller{SkipNameValidation: &o.SkipControllerNameValidation},
		Metrics:                       metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:        o.HealthAddr,
		PprofBindAddress:              o.ProfilerAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.LeaderElectLeaseDuration,
		RenewDeadline:                 &o.LeaderElectRenewDeadline,
		RetryPeriod:                   &o.LeaderElectRetryPeriod,
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if o.Runs(ProviderCAPTF) {
		uploader, err := o.OffsiteUploader()
		if err != nil {
			return nil, fmt.Errorf("--offsite-backup-url: %w", err)
		}
		encryption, err := setUpStateEncryption(ctx, cfg, mgr, o.StateEncryption)
		if err != nil {
			return nil, err
		}
		if err := captfcontrollers.Setup(ctx, mgr, captfcontrollers.Options{
			WatchFilter:            o.WatchFilter,
			Namespace:              o.Namespace,
			ClusterConcurrency:     o.Concurrency["terraformcluster"],
			MachineConcurrency:     o.Concurrency["terraformmachine"],
			MachinePoolConcurrency: o.Concurrency["terraformmachinepool"],
			Engine: captfcontrollers.EngineOptions{
				RunnerImage: o.RunnerImage, StateBackups: o.StateBackups, Offsite: uploader, DriftInterval: o.DriftInterval,
				MachineDriftInterval: o.MachineDriftInterval, MaxConcurrentDriftJobs: o.MaxConcurrentDriftJobs,
				MaxActiveJobs: o.MaxActiveJobs, NamespaceMaxActiveJobs: o.NamespaceMaxActiveJobs, ClusterMaxActiveJobs: o.ClusterMaxActiveJobs,
				ClusterOperationGate: o.ClusterOperationGate, DestroyNamespacePrefix: o.DestroyNamespacePrefix, Identity: identity,
				StateEncryption: encryption,
			},
		}); err != nil {
			return nil, fmt.Errorf("set up CAPTF controllers: %w", err)
		}
	}
	if o.Runs(ProviderCAPVCO) {
		if err := capvcocontrollers.Setup(ctx, mgr, capvcocontrollers.Options{
			WatchFilter:        o.WatchFilter,
			ClusterConcurrency: o.Concurrency["vcocluster"],
			MachineConcurrency: o.Concurrency["vcomachine"],
			AllowHTTP:          o.VCOAllowHTTP,
			AllowedHosts:       o.VCOAllowedHosts,
			Addons:             capvcocontrollers.AddonOptions{ImageRepository: o.CAPVCOAddonImageRepository, Images: o.CAPVCOAddonImages},
		}); err != nil {
			return nil, fmt.Errorf("set up CAPVCO controllers: %w", err)
		}
	}
	return mgr, nil
}

// RESTConfig loads the management cluster's config: the --kubeconfig file, else in-cluster,
// else $KUBECONFIG or ~/.kube/config.
//
// Either way the client has no client-side rate limit (QPS -1, as ctrl.GetConfig sets it): the
// API server's priority and fairness shapes the manager's requests. A kubeconfig loaded by
// client-go alone would get client-go's 5 requests a second, which bounded a fleet's bring-up.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return ctrl.GetConfig()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	if cfg.QPS == 0 {
		cfg.QPS = -1
	}
	return cfg, nil
}

// whoAmI is the user name the API server authenticates the manager as (a SelfSubjectReview,
// which every authenticated user may make).
func whoAmI(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("ask the API server who the manager is (SelfSubjectReview): %w", err)
	}
	return review.Status.UserInfo.Username, nil
}

// destroyNamespaceOf is the destroy namespace of the one namespace a --namespace manager watches.
func destroyNamespaceOf(ctx context.Context, cfg *rest.Config, namespace, prefix string) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("--namespace=%s: the manager needs the namespace's UID to name its destroy namespace "+
			"(or run with --destroy-namespace-prefix=\"\"): %w", namespace, err)
	}
	return captfcontrollers.DestroyNamespaceName(prefix, ns.UID), nil
}
