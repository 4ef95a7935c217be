package v1alpha1

// Condition types and reasons of the CAPTF kinds. They follow CAPI's v1beta2 conventions: Ready
// summarises and is mirrored by CAPI into InfrastructureReady; waiting is Unknown, never False,
// so a plan awaiting approval or a lease wait never makes an object un-ready.
const (
	// ReadyCondition summarises the object's other conditions. While something holds every
	// change until an operator acts (a plan waiting for approval, a state that could not be
	// saved, is gone or cannot be read, approvals not enforced), its message says so and what to
	// do, in a line such as "* Changes are held (DestructivePlanBlocked): ...", whatever its
	// status (after provisioning, the infrastructure's health): CAPI mirrors the condition,
	// message included, into the owner's InfrastructureReady, and clusterctl describe shows it.
	ReadyCondition = "Ready"

	// DependenciesReadyCondition is True once the owner objects, the cluster's exports and the
	// variables the module needs are all available.
	DependenciesReadyCondition = "DependenciesReady"
	// DependenciesReadyReason: every input is available.
	DependenciesReadyReason = "DependenciesReady"
	// WaitingForOwnerReason: the CAPI owner (Cluster, Machine or MachinePool) is not set yet.
	WaitingForOwnerReason = "WaitingForOwner"
	// WaitingForClusterInfrastructureReason: the TerraformCluster is not provisioned yet.
	WaitingForClusterInfrastructureReason = "WaitingForClusterInfrastructure"
	// ClusterNotTerraformReason (False, machines and pools): the Cluster's infrastructure is not
	// a TerraformCluster, so the module runs with captf_cluster_outputs = {}. It does not hold
	// the apply; it says why the module receives nothing from a cluster module.
	ClusterNotTerraformReason = "ClusterNotTerraform"
	// WaitingForBootstrapDataReason: the Machine's bootstrap Secret is not ready yet.
	WaitingForBootstrapDataReason = "WaitingForBootstrapData"
	// VariablesSourceNotFoundReason: a variablesFrom source is missing or not opted in.
	VariablesSourceNotFoundReason = "VariablesSourceNotFound"
	// VariablesInvalidReason: a variable name is reserved or a value does not decode.
	VariablesInvalidReason = "VariablesInvalid"
	// CredentialsNotFoundReason: the credentials Secret (spec.credentialsRef, or the cluster's)
	// does not exist; no Job starts, since its Pod could not start either.
	CredentialsNotFoundReason = "CredentialsNotFound"

	// ApplyJobSucceededCondition reports the newest apply (or destroy, or a failed plan of the
	// current inputs). A refresh or drift check applies nothing and leaves it as it was.
	ApplyJobSucceededCondition = "ApplyJobSucceeded"
	// ApplySucceededReason: the newest apply succeeded.
	ApplySucceededReason = "ApplySucceeded"
	// DestroySucceededReason: the destroy succeeded.
	DestroySucceededReason = "DestroySucceeded"
	// ApplyFailedReason: the newest apply (under applyPolicy Manual: or plan) failed; it is
	// retried with backoff.
	ApplyFailedReason = "ApplyFailed"
	// DestroyFailedReason: the destroy failed; it is retried with backoff.
	DestroyFailedReason = "DestroyFailed"
	// JobDeadlineExceededReason: the Job ran past activeDeadlineSeconds.
	JobDeadlineExceededReason = "JobDeadlineExceeded"
	// InputsTooLargeReason: the rendered inputs exceed the Secret budget; nothing starts.
	InputsTooLargeReason = "InputsTooLarge"
	// QuotaExceededReason: a ResourceQuota refused the Job or its Secret.
	QuotaExceededReason = "QuotaExceeded"
	// PodQuotaExceededReason: a ResourceQuota refuses the Job's Pods (pods, or the compute the
	// Pods request). Before a Job starts, a dry run of its Pod finds it and no Job is created; a
	// Job created before the quota says so while it waits without a Pod.
	PodQuotaExceededReason = "PodQuotaExceeded"
	// PodSecurityRefusedReason: the namespace's Pod Security admission refuses the Job's Pods.
	// They meet the restricted profile as CAPTF builds them.
	PodSecurityRefusedReason = "PodSecurityRefused"
	// PodsRefusedReason: another admission (a ValidatingAdmissionPolicy, a webhook, a
	// LimitRange) refuses the Job's Pods; the message is the API server's.
	PodsRefusedReason = "PodsRefused"
	// JobPolicyInvalidReason: the effective jobs policy (the object's merged with its cluster's
	// defaults) cannot produce a valid Job, e.g. a lock timeout not shorter than the deadline.
	JobPolicyInvalidReason = "JobPolicyInvalid"
	// DestructivePlanBlockedReason: the plan deletes or replaces resources and waits for an
	// approved TerraformPlan.
	DestructivePlanBlockedReason = "DestructivePlanBlocked"
	// ApprovalsNotEnforcedReason: a TerraformPlan is approved, but the manager honours no
	// approval while the admission policies approvals rest on (captf-plan-approval,
	// captf-plan-manager-fields) are missing or changed; the message says which.
	ApprovalsNotEnforcedReason = "ApprovalsNotEnforced"
	// NoApplyYetReason: no apply has run yet.
	NoApplyYetReason = "NoApplyYet"
	// StateLostReason: an apply succeeded before but its state is gone; nothing runs until a
	// backup is restored or the object is deleted with deletionPolicy Retain.
	StateLostReason = "StateLost"
	// DurableInputsMissingReason: a machine's destroy needs the inputs it was applied with and
	// their Secret is gone; only deletionPolicy Retain lets the deletion finish.
	DurableInputsMissingReason = "DurableInputsMissing"
	// StateTooLargeReason: an apply or destroy changed infrastructure but could not save the state,
	// which outgrew the 1 MiB one state Secret holds; the runner's push of the errored state failed
	// too. Nothing runs (a retry would create the same resources again) until an operator
	// recovers the state and sets captf.io/state-recovered to the Job's name.
	StateTooLargeReason = "StateTooLarge"
	// StateNotPersistedReason: an apply or destroy could not save its state (the backend refused
	// it) and the runner's push of the errored state failed too; nothing runs until an operator
	// recovers the state and sets captf.io/state-recovered to the Job's name.
	StateNotPersistedReason = "StateNotPersisted"
	// ApplyRunningReason: an apply Job is running.
	ApplyRunningReason = "ApplyRunning"
	// WaitingForRunLeaseReason: another Job of this object holds its run lease.
	WaitingForRunLeaseReason = "WaitingForRunLease"
	// WaitingForClusterOperationReason: the TerraformCluster is applying; machines and pools wait.
	WaitingForClusterOperationReason = "WaitingForClusterOperation"
	// WaitingForMachineOperationsReason: the cluster waits for running machine and pool Jobs.
	WaitingForMachineOperationsReason = "WaitingForMachineOperations"
	// WaitingForJobSlotReason: the manager-wide or per-cluster cap on active Jobs is reached.
	WaitingForJobSlotReason = "WaitingForJobSlot"
	// PlanAwaitingApprovalReason: a TerraformPlan waits for approval.
	PlanAwaitingApprovalReason = "PlanAwaitingApproval"
	// PlanChangedReason: the approved apply applied nothing, because the plan it made again
	// differs from the approved one, the state moved on since the approved saved plan was made
	// (OpenTofu refused it as stale), or the manager could not verify that saved plan against
	// the approved hash; the new plan waits for approval.
	PlanChangedReason = "PlanChanged"

	// StateReadableCondition reports whether the backend's state Secrets can be read.
	StateReadableCondition = "StateReadable"
	// StateReadReason: the state was read.
	StateReadReason = "StateRead"
	// StateNotFoundReason: there is no state yet.
	StateNotFoundReason = "StateNotFound"
	// StateEncryptedReason: the state is encrypted (unsupported); nothing is backed up.
	StateEncryptedReason = "StateEncrypted"
	// StateCorruptReason: the state does not decode, is not version 4, or exceeds the bounds.
	StateCorruptReason = "StateCorrupt"
	// StateInconsistentReason: the state's chunks are missing, duplicated or foreign.
	StateInconsistentReason = "StateInconsistent"
	// StateLockedReason: the state is locked by a holder that is not one of our runs.
	StateLockedReason = "StateLocked"
	// RetainedStateFoundReason: state retained from an earlier object of the same name exists.
	RetainedStateFoundReason = "RetainedStateFound"

	// StateNearSecretLimitCondition is True while the state's compressed size passes 75% of the
	// 1 MiB one state Secret holds (negative polarity): the apply that grows it past 1 MiB cannot
	// save its state. Never part of Ready.
	StateNearSecretLimitCondition = "StateNearSecretLimit"
	// StateNearSecretLimitReason: the state takes more than 75% of a Secret.
	StateNearSecretLimitReason = "StateNearSecretLimit"
	// StateSizeWithinLimitReason: the state takes at most 75% of a Secret.
	StateSizeWithinLimitReason = "StateSizeWithinLimit"

	// OffsiteBackupsCurrentCondition reports whether every complete state backup set has a copy
	// in the offsite bucket (only with the manager's --offsite-backup-url). Never part of Ready:
	// a failed copy holds nothing.
	OffsiteBackupsCurrentCondition = "OffsiteBackupsCurrent"
	// OffsiteBackupsCopiedReason: every complete backup set has an offsite copy.
	OffsiteBackupsCopiedReason = "OffsiteBackupsCopied"
	// OffsiteBackupsPendingReason: backup sets wait for their copy (the next pass makes it).
	OffsiteBackupsPendingReason = "OffsiteBackupsPending"
	// OffsiteBackupFailedReason: the last copy failed; it is retried after a growing wait and the
	// in-cluster backups are kept.
	OffsiteBackupFailedReason = "OffsiteBackupFailed"

	// OutputsValidCondition reports whether the module's outputs satisfy the contract.
	OutputsValidCondition = "OutputsValid"
	// OutputsValidReason: the required outputs are present and valid.
	OutputsValidReason = "OutputsValid"
	// OutputsPendingReason: a required output is declared but still null.
	OutputsPendingReason = "OutputsPending"
	// OutputsInvalidReason: an output has the wrong shape.
	OutputsInvalidReason = "OutputsInvalid"
	// ProviderIDChangedReason: the module reported a different provider_id after it was latched.
	ProviderIDChangedReason = "ProviderIDChanged"
	// ControlPlaneEndpointChangedReason: the cluster module reports a control_plane_endpoint
	// other than the one it chose first, which spec.controlPlaneEndpoint (written once) keeps.
	ControlPlaneEndpointChangedReason = "ControlPlaneEndpointChanged"

	// InfrastructureHealthyCondition reports the module's health output.
	InfrastructureHealthyCondition = "InfrastructureHealthy"
	// HealthyReason: the module reports running and healthy.
	HealthyReason = "Healthy"
	// InstancePendingReason: the module reports pending.
	InstancePendingReason = "InstancePending"
	// InstanceUnhealthyReason: the module reports running but not healthy.
	InstanceUnhealthyReason = "InstanceUnhealthy"
	// InstanceDegradedReason: the module reports degraded.
	InstanceDegradedReason = "InstanceDegraded"
	// InstanceStoppedReason: the module reports stopped.
	InstanceStoppedReason = "InstanceStopped"
	// InstanceTerminatedReason: the module reports terminated.
	InstanceTerminatedReason = "InstanceTerminated"
	// HealthUnknownReason: no health output yet, or the module reports unknown.
	HealthUnknownReason = "HealthUnknown"

	// DriftDetectedCondition is True when the newest drift check found drift (negative polarity).
	DriftDetectedCondition = "DriftDetected"
	// NoDriftReason: the newest drift check found nothing.
	NoDriftReason = "NoDrift"
	// DriftReportedReason: drift was found and is reported only.
	DriftReportedReason = "DriftReported"
	// DriftRemediatingReason: drift was found and an apply undoes it.
	DriftRemediatingReason = "DriftRemediating"
	// DriftNotCheckedReason: no drift check ran yet.
	DriftNotCheckedReason = "DriftNotChecked"

	// RestoreJobSucceededCondition reports the newest requested restore.
	RestoreJobSucceededCondition = "RestoreJobSucceeded"
	// StateRestoredReason: the backup was pushed back.
	StateRestoredReason = "StateRestored"
	// RestoreFailedReason: the restore failed; it is not retried for the same serial.
	RestoreFailedReason = "RestoreFailed"
	// RestoreBackupNotFoundReason: no complete backup of the requested serial exists.
	RestoreBackupNotFoundReason = "RestoreBackupNotFound"
	// RestoreBackupInvalidReason: the backup's Secrets do not hold the state it records (digest,
	// serial, lineage), or its lineage is not the current state's; nothing was pushed.
	RestoreBackupInvalidReason = "RestoreBackupInvalid"

	// DeletionBlockedCondition is True while a TerraformCluster waits for its machines and
	// pools to be destroyed (negative polarity).
	DeletionBlockedCondition = "DeletionBlocked"
	// DependentsExistReason: machines or pools of the cluster still exist.
	DependentsExistReason = "DependentsExist"
	// NotBlockedReason: nothing blocks the deletion.
	NotBlockedReason = "NotBlocked"

	// EndpointAvailableCondition reports whether the cluster has a control-plane endpoint.
	EndpointAvailableCondition = "EndpointAvailable"
	// EndpointAvailableReason: the endpoint is set.
	EndpointAvailableReason = "EndpointAvailable"
	// WaitingForEndpointReason: neither the user nor the module set an endpoint yet.
	WaitingForEndpointReason = "WaitingForEndpoint"

	// AutoscalingActiveCondition (pools) is True while the module's own autoscaling owns the
	// pool's replicas: the MachinePool carries both autoscaler size annotations and its
	// cluster.x-k8s.io/replicas-managed-by names CAPTF, which copies the observed replicas back
	// into MachinePool.spec.replicas. Never part of Ready.
	AutoscalingActiveCondition = "AutoscalingActive"
	// ReplicasManagedByModuleReason: the module scales the pool within the annotated bounds.
	ReplicasManagedByModuleReason = "ReplicasManagedByModule"
	// AutoscalingDisabledReason: the MachinePool has no autoscaler size annotations;
	// MachinePool.spec.replicas is the pool's size.
	AutoscalingDisabledReason = "AutoscalingDisabled"
	// AutoscalingAnnotationsInvalidReason: the size annotations are not both integers with
	// 0 <= min <= max; autoscaling stays off until they are.
	AutoscalingAnnotationsInvalidReason = "AutoscalingAnnotationsInvalid"
	// ReplicasManagedExternallyReason: cluster.x-k8s.io/replicas-managed-by names another
	// manager; CAPTF renders MachinePool.spec.replicas and never writes it.
	ReplicasManagedExternallyReason = "ReplicasManagedExternally"

	// ClusterExportsCurrentCondition (pools) says whether the pool runs with the cluster's
	// current exports. A destructive plan of changed exports is held: the pool keeps applying
	// (replica changes included) with the exports of its last successful apply until the
	// TerraformPlan of the change is approved. Never part of Ready.
	ClusterExportsCurrentCondition = "ClusterExportsCurrent"
	// ExportsAppliedReason (True): the pool's inputs carry the cluster's current exports.
	ExportsAppliedReason = "ExportsApplied"
	// ExportsChangeHeldReason (False): the cluster's changed exports make the pool's plan
	// destructive; the pool applies with the exports of its last successful apply until the
	// pending TerraformPlan is approved.
	ExportsChangeHeldReason = "ExportsChangeHeld"
	// ExportsRecordNotKeptReason (True): the pool runs with the current exports, but the record
	// of the exports it last applied could not be kept (it would not fit the durable inputs
	// Secret's budget, or an apply of other exports did not succeed), so a destructive exports
	// change holds the whole pool, replica changes included, until an apply succeeds.
	ExportsRecordNotKeptReason = "ExportsRecordNotKept"

	// ApprovedCondition on a TerraformPlan says whether it is approved.
	ApprovedCondition = "Approved"
	// PlanApprovedReason: spec.approved is true.
	PlanApprovedReason = "Approved"
	// PlanNotApprovedReason: nobody approved the plan yet (or it ended unapproved).
	PlanNotApprovedReason = "NotApproved"
)
