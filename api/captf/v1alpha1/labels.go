package v1alpha1

// Labels and annotations CAPTF reads or writes. They are API: scripts, the kubectl plugin and
// clusterctl move depend on them.
const (
	// ManagedLabel marks every Secret, Job and Lease the manager creates; the manager's cache
	// holds only objects with this label.
	ManagedLabel = "captf.io/managed"
	// OwnerKindLabel names the kind of the CAPTF object a managed object belongs to.
	OwnerKindLabel = "captf.infrastructure.cluster.x-k8s.io/owner-kind"
	// OwnerNameLabel names the CAPTF object a managed object belongs to (hashed above 63 chars).
	OwnerNameLabel = "captf.infrastructure.cluster.x-k8s.io/owner-name"
	// OperationLabel on a Job names its operation.
	OperationLabel = "captf.infrastructure.cluster.x-k8s.io/op"
	// AttemptLabel on a Job is its attempt number (consecutive failures of its operation + 1).
	AttemptLabel = "captf.infrastructure.cluster.x-k8s.io/attempt"
	// VariablesLabel opts a ConfigMap or Secret in as a variablesFrom source.
	VariablesLabel = "captf.io/variables"
	// RunnerLabel opts a ServiceAccount in as a custom runner account.
	RunnerLabel = "captf.io/runner"
	// StateBackupLabel marks a state backup Secret.
	StateBackupLabel = "captf.io/state-backup"
	// StateBackupSuffixLabel names the state suffix a backup belongs to.
	StateBackupSuffixLabel = "captf.io/state-backup-suffix"
	// RetainedFromUIDLabel marks state kept by deletionPolicy Retain.
	RetainedFromUIDLabel = "captf.io/retained-from-uid"
	// KeptForDestroyLabel marks a Secret or ConfigMap a CAPTF object ran a Job with (its
	// credentials, image pull Secrets, what its Jobs policy's env reads): the garbage collector
	// and the namespace controller may not delete it while it is labelled
	// (config/admission/captf-state-protection.yaml), so a destroy after the namespace's deletion
	// still has it. The manager removes the label once no CAPTF object in the namespace names it.
	KeptForDestroyLabel = "captf.io/kept-for-destroy"
	// DestroyForUIDLabel on a copy of a CAPTF object in a destroy namespace is the UID of the
	// object whose infrastructure the copy destroys (its own namespace is being deleted).
	DestroyForUIDLabel = "captf.io/destroy-for-uid"
	// DestroyForNamespaceUIDLabel marks a destroy namespace: the UID of the one namespace whose
	// objects' copies it holds (each namespace being deleted gets its own, so one tenant's module
	// never runs beside another tenant's copies). The manager refuses a namespace of that name
	// without the label, the source annotation and its own identity annotation.
	DestroyForNamespaceUIDLabel = "captf.io/destroy-for-namespace-uid"
	// LeaseLabel marks a run or cluster lease.
	LeaseLabel = "captf.io/lease"
	// PlanPhaseLabel mirrors a TerraformPlan's phase (it survives clusterctl move, status does not).
	PlanPhaseLabel = "captf.io/plan-phase"
	// DestructiveLabel marks a TerraformPlan that deletes or replaces resources an approval must
	// cover (the instances a machine pool's scale-down drops need none).
	DestructiveLabel = "captf.io/destructive"
	// MovesEndpointLabel marks a TerraformPlan that changes the control-plane endpoint latched in
	// its TerraformCluster (spec.summary.endpointChange says from where to where).
	MovesEndpointLabel = "captf.io/moves-endpoint"

	// InputsHashAnnotation records the inputs hash of an applied state (on the base state Secret,
	// on backups and on Jobs).
	InputsHashAnnotation = "captf.io/inputs-hash"
	// AppliedImageAnnotation records, on the base state Secret, the module image
	// (spec.source.image) of the newest successful apply: the module version the state was
	// built with. A spec.source.image that differs from it rolls out (an apply is due).
	AppliedImageAnnotation = "captf.io/applied-image"
	// AppliedAnnotation on the durable inputs Secret is the "ever applied" marker that survives
	// clusterctl move.
	AppliedAnnotation = "captf.io/applied"
	// RestoreStateAnnotation requests a restore of the named backup serial.
	RestoreStateAnnotation = "captf.io/restore-state"
	// AdoptRetainedStateAnnotation, set to the UID a retained state came from (its
	// captf.io/retained-from-uid label), makes a new object of the same name take that state,
	// its backups and durable inputs over instead of holding on them.
	AdoptRetainedStateAnnotation = "captf.io/adopt-retained-state"
	// DestroyForAnnotation on a copy in the destroy namespace is the kind, namespace and name of
	// the object it destroys for ("TerraformCluster team-a/prod"); the object is reconciled when
	// its copy changes.
	DestroyForAnnotation = "captf.io/destroy-for"
	// DestroyNamespaceForAnnotation on a destroy namespace names the namespace whose objects'
	// copies it holds.
	DestroyNamespaceForAnnotation = "captf.io/destroy-namespace-for"
	// CreatedByAnnotation on a destroy namespace is the user name of the manager that created it.
	CreatedByAnnotation = "captf.io/created-by"
	// HandoverFinalizer keeps a copy in a destroy namespace after its own destroy finished, until
	// the object it destroys for has seen it (the copy, not anything the tenant can write, is the
	// proof that the destroy happened); the manager removes it.
	HandoverFinalizer = "captf.io/destroy-handover"
	// EndpointSourceAnnotation records whether the endpoint came from the user or the module.
	EndpointSourceAnnotation = "captf.io/endpoint-source"
	// BookkeptAnnotation marks a finished Job whose result was recorded.
	BookkeptAnnotation = "captf.io/bookkept"
	// PlanAnnotation on an apply Job names the approved TerraformPlan it applies.
	PlanAnnotation = "captf.io/plan"
	// PlanHashAnnotation records a plan hash (on Jobs).
	PlanHashAnnotation = "captf.io/plan-hash"
	// RestoreSerialAnnotation on a restore Job is the backup serial it restores.
	RestoreSerialAnnotation = "captf.io/restore-serial"
	// LeaseOpAnnotation on a run or cluster Lease is the operation of the Job holding it.
	LeaseOpAnnotation = "captf.io/lease-op"
	// LeaseAcquiredAtAnnotation on a run or cluster Lease is when it was taken (RFC 3339, nanoseconds).
	LeaseAcquiredAtAnnotation = "captf.io/lease-acquired-at"
	// StateNotPersistedAnnotation on a finished Job records that its state could not be saved
	// (the errored state's compressed size in bytes): no run starts after it until the object's
	// StateRecoveredAnnotation names the Job.
	StateNotPersistedAnnotation = "captf.io/state-not-persisted"
	// StateRecoveredAnnotation on a CAPTF object, set by an operator to the name of a Job whose
	// state could not be saved, says that state was dealt with (recovered, or its resources
	// removed): runs start again.
	StateRecoveredAnnotation = "captf.io/state-recovered"
	// StateNotPersistedHoldAnnotation on a CAPTF object is the manager's copy of a hold on a
	// state that could not be saved (JSON: the Job, its operation, the compressed size, the kept
	// backup set, when it was recorded). It moves with the object, so the hold outlives the Job:
	// after `clusterctl move` (Jobs do not move) or a deleted Job, nothing runs until
	// StateRecoveredAnnotation names that Job or a newer run (a restore) replaced the state.
	StateNotPersistedHoldAnnotation = "captf.io/state-not-persisted-hold"
	// ExportsRecordAnnotation on a pool's durable inputs Secret says whether the Secret keeps
	// the record of the cluster exports the pool last applied successfully (data key
	// applied-exports.json): "kept", or why not ("over-budget", "apply-failed").
	ExportsRecordAnnotation = "captf.io/exports-record"
	// ExportsPendingAnnotation on a pool's durable inputs Secret is the inputs hash of an apply
	// that started with other exports than the record's: until its outcome is known the record
	// is not used, and an apply that did not succeed loses it.
	ExportsPendingAnnotation = "captf.io/exports-pending"
)
