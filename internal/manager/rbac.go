package manager

// Every cluster-wide permission the manager needs, in one place; `make generate` turns these
// markers (and the few beside the code that uses them) into config/rbac/role.yaml. What it
// writes in tenants' namespaces is not here: it binds config/rbac/namespace_role.yaml
// (capx-captf-namespace) in each namespace that holds CAPTF objects, and nowhere else. The
// runner's own, narrower ClusterRole is config/rbac/runner_role.yaml. docs/captf/security.md
// says why each cluster-wide right is needed.

// Its own kinds.
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters;terraformmachines;terraformmachinepools;vcoclusters;vcomachines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters/status;terraformmachines/status;terraformmachinepools/status;vcoclusters/status;vcomachines/status;terraformplans/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters/finalizers;terraformmachines/finalizers;terraformmachinepools/finalizers;vcoclusters/finalizers;vcomachines/finalizers,verbs=update
// "manage" is a custom verb: it lets the manager write what only it may write of a TerraformPlan
// and its views (config/admission/captf-plan-manager-fields.yaml).
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformplans,verbs=get;list;watch;create;update;patch;delete;manage
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformclustertemplates;terraformmachinetemplates;terraformmachinepooltemplates;vcoclustertemplates;vcomachinetemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=vcomachinetemplates;vcomachinetemplates/status,verbs=update;patch

// Cluster API's objects: read, and a MachinePool's replicas and provider IDs.
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;machines,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinepools,verbs=get;list;watch;patch

// Reads, cluster-wide: its caches and live reads (credentials, bootstrap data, variables, Pods,
// Jobs, the runner's accounts and bindings, lock Leases). RBAC cannot narrow list to labelled
// objects, so this includes every Secret's data; the manager caches Secret metadata only.
// +kubebuilder:rbac:groups="",resources=secrets;configmaps;pods;serviceaccounts,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles,verbs=get

// Events about its objects, wherever they are (a Job controller's FailedCreate is read too).
// +kubebuilder:rbac:groups="",resources=events,verbs=get;list;create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Its rights in a namespace: the RoleBinding capx-manager to capx-captf-namespace, and the
// runner's RoleBinding to capx-captf-runner. create is the one write on RoleBindings it holds
// everywhere; bind limits what it can bind to these two roles.
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=capx-captf-runner;capx-captf-namespace

// The state key endpoint (--state-encryption) checks runners' tokens; its master key Secret, in
// the manager's own namespace, is written through config/rbac/state_encryption_role.yaml.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
