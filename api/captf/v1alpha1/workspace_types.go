package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WorkspaceSpec is what every CAPTF kind runs: a module image, the variables it gets, and how its
// Jobs run. It is inlined into the cluster, machine and machine pool specs.
type WorkspaceSpec struct {
	// source names the module image. The image carries the module at /captf/module and the
	// OpenTofu or Terraform binary at /captf/runtime (module contract v1alpha1); its tag or digest
	// is the module version.
	// +required
	Source WorkspaceSource `json:"source"`

	// credentialsRef names a Secret in the object's namespace whose keys reach every Job of this
	// object as environment variables and as files under /var/run/captf/credentials. Machines
	// and pools without one use their TerraformCluster's spec.defaults.credentialsRef, then the
	// cluster's own credentialsRef. The Secret is read by the Job only, never by the manager's
	// logs, events or status.
	// +optional
	CredentialsRef *corev1.LocalObjectReference `json:"credentialsRef,omitempty"`

	// variables are passed to the module by name. Values keep their JSON type; the module's
	// variable declarations convert them. Names must match ^[a-zA-Z_][a-zA-Z0-9_-]*$; names
	// starting with captf_ and the contract inputs of the module's role are reserved. (CRD
	// validation rules cannot see untyped values, so the names are checked by the admission
	// policy in config/admission and again by the controller.)
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	Variables map[string]apiextensionsv1.JSON `json:"variables,omitempty"`

	// variablesFrom reads more variables from ConfigMaps or Secrets in the object's namespace.
	// Each source must carry the label captf.io/variables=true. A later source wins over an
	// earlier one, and spec.variables wins over all. Variables read from a Secret are declared
	// sensitive, so their values never appear in plan output.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	VariablesFrom []VariablesSource `json:"variablesFrom,omitempty"`

	// jobs tunes the Kubernetes Jobs that run the module. Unset fields take the cluster's
	// spec.defaults.jobs (for machines and pools), then the built-in defaults.
	// +optional
	Jobs *JobPolicy `json:"jobs,omitempty"`

	// applyPolicy says whether changes are applied at once (Automatic) or planned and held
	// until a TerraformPlan is approved (Manual). The first apply of an object is never held.
	// Under Automatic, a plan that deletes or replaces a resource is still held for approval
	// (the destructive-plan guard).
	// +optional
	// +kubebuilder:default=Automatic
	ApplyPolicy ApplyPolicy `json:"applyPolicy,omitempty"`

	// drift schedules drift checks (a refresh followed by a plan) and says what to do when one
	// finds drift.
	// +optional
	Drift *DriftPolicy `json:"drift,omitempty"`

	// deletionPolicy says what deleting the object does to its infrastructure: Destroy runs the
	// module's destroy; Retain keeps the infrastructure and the state Secrets (unowned, labelled
	// captf.io/retained-from-uid) and only removes the object.
	// +optional
	// +kubebuilder:default=Destroy
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// stateEncryption turns on OpenTofu's state encryption for this object, with a key the
	// manager derives from its master key (the manager must run with --state-encryption). Unset:
	// the state is stored plain, as always. The state changes form at its next apply that
	// writes it, not at once.
	// +optional
	StateEncryption *StateEncryption `json:"stateEncryption,omitempty"`
}

// StateEncryption says how the object's Jobs store its state.
type StateEncryption struct {
	// mode is Encrypt (write the state encrypted; a plain state is still read, so an existing
	// object can turn encryption on) or Decrypt (write it plain; an encrypted state is still
	// read). An object without stateEncryption whose state is still encrypted runs as Decrypt.
	// +required
	Mode StateEncryptionMode `json:"mode"`
}

// StateEncryptionMode is how a Job writes the state.
// +kubebuilder:validation:Enum=Encrypt;Decrypt
type StateEncryptionMode string

// State encryption modes.
const (
	StateEncryptionEncrypt StateEncryptionMode = "Encrypt"
	StateEncryptionDecrypt StateEncryptionMode = "Decrypt"
)

// WorkspaceSource names the module image.
type WorkspaceSource struct {
	// image is the OCI reference of the module image.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`

	// imagePullPolicy of the module container. Defaults to IfNotPresent.
	// +optional
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
}

// VariablesSource is one ConfigMap or Secret whose keys become module variables.
// +kubebuilder:validation:XValidation:rule="has(self.configMapRef) != has(self.secretRef)",message="set exactly one of configMapRef or secretRef"
type VariablesSource struct {
	// configMapRef names a ConfigMap in the object's namespace.
	// +optional
	ConfigMapRef *corev1.LocalObjectReference `json:"configMapRef,omitempty"`

	// secretRef names a Secret in the object's namespace. Its variables are sensitive.
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`

	// optional lets the object proceed when the source does not exist.
	// +optional
	Optional bool `json:"optional,omitempty"`

	// format says how each value is read: String passes it verbatim, JSON decodes it first.
	// +optional
	// +kubebuilder:default=String
	Format VariablesFormat `json:"format,omitempty"`
}

// VariablesFormat says how the values of a variables source are read.
// +kubebuilder:validation:Enum=String;JSON
type VariablesFormat string

const (
	// VariablesFormatString passes each value to the module as a string.
	VariablesFormatString VariablesFormat = "String"
	// VariablesFormatJSON decodes each value as JSON before passing it to the module.
	VariablesFormatJSON VariablesFormat = "JSON"
)

// ApplyPolicy says whether changes apply at once or wait for approval.
// +kubebuilder:validation:Enum=Automatic;Manual
type ApplyPolicy string

const (
	// ApplyPolicyAutomatic applies changes at once (destructive plans still wait for approval).
	ApplyPolicyAutomatic ApplyPolicy = "Automatic"
	// ApplyPolicyManual plans every change and applies it only once its TerraformPlan is approved.
	ApplyPolicyManual ApplyPolicy = "Manual"
)

// DeletionPolicy says what deleting an object does to its infrastructure.
// +kubebuilder:validation:Enum=Destroy;Retain
type DeletionPolicy string

const (
	// DeletionPolicyDestroy destroys the infrastructure before the object goes.
	DeletionPolicyDestroy DeletionPolicy = "Destroy"
	// DeletionPolicyRetain keeps the infrastructure and its state.
	DeletionPolicyRetain DeletionPolicy = "Retain"
)

// JobPolicy tunes the Jobs that run the module. Every field is optional; defaults are resolved at
// reconcile time and never written back.
// +kubebuilder:validation:XValidation:rule="!has(self.lockTimeoutSeconds) || !has(self.activeDeadlineSeconds) || self.lockTimeoutSeconds < self.activeDeadlineSeconds",message="lockTimeoutSeconds must be shorter than activeDeadlineSeconds, or a Job could spend its whole deadline waiting for the state lock"
type JobPolicy struct {
	// successfulJobsHistoryLimit is how many finished successful Jobs to keep per object (default 3).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	SuccessfulJobsHistoryLimit *int32 `json:"successfulJobsHistoryLimit,omitempty"`

	// failedJobsHistoryLimit is how many failed Jobs to keep per object (default 3). It also
	// caps retries at the long backoff once that many consecutive failures happened.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	FailedJobsHistoryLimit *int32 `json:"failedJobsHistoryLimit,omitempty"`

	// activeDeadlineSeconds bounds each Job (default 3600).
	// +optional
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=86400
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// lockTimeoutSeconds is how long a run waits for the state lock (default 300).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	LockTimeoutSeconds *int32 `json:"lockTimeoutSeconds,omitempty"`

	// serviceAccountName runs the Jobs under this ServiceAccount instead of captf-runner. It
	// must exist and carry the label captf.io/runner=true.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// imagePullSecrets for the module image.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// resources of the module container (default: requests 250m CPU and 512Mi memory, limit
	// 2Gi memory).
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// env adds environment variables to the module container. Variables the runner owns
	// (TF_*, KUBE_*, KUBERNETES_*, HOME, TMPDIR, CHECKPOINT_DISABLE) are refused.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(e, !e.name.startsWith('TF_') && !e.name.startsWith('KUBE_') && !e.name.startsWith('KUBERNETES_') && !(e.name in ['HOME', 'TMPDIR', 'CHECKPOINT_DISABLE']))",message="TF_*, KUBE_*, KUBERNETES_*, HOME, TMPDIR and CHECKPOINT_DISABLE are set by the runner and cannot be overridden"
	Env []corev1.EnvVar `json:"env,omitempty"`
}

// DriftPolicy schedules drift checks.
type DriftPolicy struct {
	// intervalSeconds between drift checks; 0 disables them. Defaults to the manager's
	// --drift-interval.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2592000
	IntervalSeconds *int32 `json:"intervalSeconds,omitempty"`

	// action on drift: Report sets DriftDetected; Remediate also re-applies (under the same
	// guards as any apply). Machines only report.
	// +optional
	// +kubebuilder:default=Report
	Action DriftAction `json:"action,omitempty"`
}

// DriftAction says what to do about drift.
// +kubebuilder:validation:Enum=Report;Remediate
type DriftAction string

const (
	// DriftActionReport only reports drift.
	DriftActionReport DriftAction = "Report"
	// DriftActionRemediate re-applies to undo drift.
	DriftActionRemediate DriftAction = "Remediate"
)

// Operation is one kind of Job run.
// +kubebuilder:validation:Enum=plan;apply;destroy;refresh;drift;restore
type Operation string

const (
	// OperationPlan plans and records a TerraformPlan (Manual apply policy).
	OperationPlan Operation = "plan"
	// OperationApply applies the module.
	OperationApply Operation = "apply"
	// OperationDestroy destroys everything in the state.
	OperationDestroy Operation = "destroy"
	// OperationRefresh refreshes the state and outputs without changing infrastructure.
	OperationRefresh Operation = "refresh"
	// OperationDrift refreshes, then plans to count drift.
	OperationDrift Operation = "drift"
	// OperationRestore pushes a state backup back into the backend.
	OperationRestore Operation = "restore"
)

// WorkspaceStatus is what every CAPTF kind reports about its runs and its state. Nothing here is
// load-bearing: clusterctl move drops status, so every field can be rebuilt from the state
// Secrets, the durable inputs Secret and the Jobs.
type WorkspaceStatus struct {
	// activeJob is the Job running now, if any.
	// +optional
	ActiveJob *JobReference `json:"activeJob,omitempty"`

	// lastRun summarises the newest finished Job.
	// +optional
	LastRun *RunSummary `json:"lastRun,omitempty"`

	// appliedInputsHash is the inputs hash of the newest successful apply (h2:...).
	// +optional
	// +kubebuilder:validation:MaxLength=80
	AppliedInputsHash string `json:"appliedInputsHash,omitempty"`

	// stateSecretSuffix is the kubernetes backend's secret_suffix: the state lives in
	// Secret tfstate-default-<suffix>.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	StateSecretSuffix string `json:"stateSecretSuffix,omitempty"`

	// observedStateSerial is the serial of the state last read.
	// +optional
	ObservedStateSerial *int64 `json:"observedStateSerial,omitempty"`

	// stateResources counts the managed resources in the state last read.
	// +optional
	StateResources *int32 `json:"stateResources,omitempty"`

	// stateBytes is the compressed size of the state last read, as its Secrets hold it; one
	// Secret holds at most 1 MiB (1048576), and StateNearSecretLimit warns past 75% of that.
	// +optional
	StateBytes *int64 `json:"stateBytes,omitempty"`

	// lastRestoredSerial is the backup serial most recently restored.
	// +optional
	LastRestoredSerial *int64 `json:"lastRestoredSerial,omitempty"`

	// stateBackups lists the newest state backups, newest first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	StateBackups []StateBackup `json:"stateBackups,omitempty"`

	// lastDriftCheck is when the newest drift check finished.
	// +optional
	LastDriftCheck *metav1.Time `json:"lastDriftCheck,omitempty"`

	// lastRefresh is when the newest refresh finished.
	// +optional
	LastRefresh *metav1.Time `json:"lastRefresh,omitempty"`

	// health is the module's latest health output.
	// +optional
	Health *Health `json:"health,omitempty"`

	// pendingPlanRef names the TerraformPlan waiting for approval, if any.
	// +optional
	PendingPlanRef *corev1.LocalObjectReference `json:"pendingPlanRef,omitempty"`

	// observedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// JobReference names a running Job.
type JobReference struct {
	// name of the Job.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// operation it runs.
	Operation Operation `json:"operation"`
	// startTime of the Job.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
}

// RunSummary is the result of one finished Job.
type RunSummary struct {
	// job is the Job's name.
	// +kubebuilder:validation:MaxLength=63
	Job string `json:"job"`
	// operation it ran.
	Operation Operation `json:"operation"`
	// result: Succeeded, Failed, Blocked (destructive plan held), PlanChanged or Interrupted.
	// +kubebuilder:validation:Enum=Succeeded;Failed;Blocked;PlanChanged;Interrupted
	Result RunResult `json:"result"`
	// finishedAt is when the Job finished.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// changes counts what an apply or destroy changed.
	// +optional
	Changes *ChangeCounts `json:"changes,omitempty"`
	// error says what failed, when the run failed.
	// +optional
	Error *RunError `json:"error,omitempty"`
	// drift is what a drift check found.
	// +optional
	Drift *DriftSummary `json:"drift,omitempty"`
}

// RunResult is the outcome of one Job.
type RunResult string

const (
	// RunSucceeded means the operation finished.
	RunSucceeded RunResult = "Succeeded"
	// RunFailed means a step failed.
	RunFailed RunResult = "Failed"
	// RunBlocked means the destructive-plan guard stopped the apply before it changed anything.
	RunBlocked RunResult = "Blocked"
	// RunPlanChanged means an approved apply planned something other than what was approved.
	RunPlanChanged RunResult = "PlanChanged"
	// RunInterrupted means the Job was stopped (deleted, evicted or past its deadline).
	RunInterrupted RunResult = "Interrupted"
)

// ChangeCounts counts resource changes.
type ChangeCounts struct {
	// add counts created resources.
	Add int32 `json:"add"`
	// change counts updated resources.
	Change int32 `json:"change"`
	// destroy counts deleted resources (a replace counts once here and once in add).
	Destroy int32 `json:"destroy"`
}

// RunError says what failed.
type RunError struct {
	// kind of failure: image-layout, step, interrupted, blocked, plan-changed, state-not-persisted, result.
	// +kubebuilder:validation:MaxLength=32
	Kind string `json:"kind"`
	// step that failed (init, validate, plan, apply, ...).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Step string `json:"step,omitempty"`
	// summary is a short, redacted excerpt of the failure.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Summary string `json:"summary,omitempty"`
}

// DriftSummary is what a drift check found.
type DriftSummary struct {
	ChangeCounts `json:",inline"`
	// resources lists up to 20 drifted addresses.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	Resources []string `json:"resources,omitempty"`
}

// StateBackup is one backup of the state.
type StateBackup struct {
	// serial of the backed-up state; restore it with the captf.io/restore-state annotation.
	Serial int64 `json:"serial"`
	// secretName of the backup's first Secret.
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`
	// takenAt is when the backup was taken.
	// +optional
	TakenAt *metav1.Time `json:"takenAt,omitempty"`
	// resources counts managed resources in the backup.
	// +optional
	Resources int32 `json:"resources,omitempty"`
	// bytes is the compressed size of the backup.
	// +optional
	Bytes int64 `json:"bytes,omitempty"`
	// offsite is where the backup's off-cluster copy is, s3://<bucket>/<key>, once the manager
	// has stored it (--offsite-backup-url); empty while it has none.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Offsite string `json:"offsite,omitempty"`
}

// Health is a module's health output.
type Health struct {
	// state is one of pending, running, degraded, stopped, terminated, unknown.
	// +kubebuilder:validation:Enum=pending;running;degraded;stopped;terminated;unknown
	State string `json:"state"`
	// healthy is the module's verdict.
	Healthy bool `json:"healthy"`
	// message explains the state.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// InitializationStatus reports the CAPI contract's initialization.
// +kubebuilder:validation:MinProperties=1
type InitializationStatus struct {
	// provisioned is true once the infrastructure was applied and its required outputs are
	// valid. It never goes back to false.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}
