package controllers

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/captf/decide"
	"github.com/capx-io/capx/internal/captf/inputs"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/leases"
	"github.com/capx-io/capx/internal/captf/offsite"
	"github.com/capx-io/capx/internal/captf/outputs"
	"github.com/capx-io/capx/internal/captf/state"
)

// engine is what every CAPTF kind's reconcile shares: clients, settings and the phases. The
// per-kind differences live behind kind (cluster.go, machine.go, machinepool.go).
type engine struct {
	client    client.Client
	reader    client.Reader // live reads: user Secrets, ConfigMaps, Pods, Leases
	recorder  record.EventRecorder
	clock     clock.PassiveClock
	leases    *leases.Leases
	states    *stateCache
	refusals  *refusals
	approvals *approvalGuard
	opts      EngineOptions
}

// EngineOptions are the manager's CAPTF settings.
type EngineOptions struct {
	// RunnerImage is the manager's own image; its binary runs inside every Job as the runner.
	RunnerImage string
	// StateBackups is how many complete state backups to keep per object (0: take none).
	StateBackups int
	// Offsite copies every complete backup set off the cluster (nil: no copies).
	Offsite *offsite.Uploader
	// DriftInterval is the default drift-check interval of clusters and pools (0 disables
	// their default drift checks).
	DriftInterval time.Duration
	// MachineDriftInterval is the default drift-check interval of machines (0 disables them).
	MachineDriftInterval time.Duration
	// MaxConcurrentDriftJobs is the manager-wide budget of drift Jobs running at once (0: none).
	MaxConcurrentDriftJobs int
	// MaxActiveJobs caps CAPTF Jobs running at once across the manager (0: no cap).
	MaxActiveJobs int
	// NamespaceMaxActiveJobs caps them per namespace (0: no cap): one tenant cannot take every
	// slot, and no TerraformCluster's spec.maxActiveJobs goes above it.
	NamespaceMaxActiveJobs int
	// ClusterMaxActiveJobs caps them per Cluster unless a TerraformCluster sets its own.
	ClusterMaxActiveJobs int
	// ClusterOperationGate serialises a cluster's applies with its machines' and pools' Jobs.
	ClusterOperationGate bool
	// DestroyNamespacePrefix starts the name of each namespace's destroy namespace, where the
	// objects deleted with that namespace are destroyed, as copies ("": nowhere; their deletion
	// holds). See nsdelete.go.
	DestroyNamespacePrefix string
	// Identity is the manager's user name as the API server authenticates it, recorded on the
	// destroy namespaces it makes.
	Identity string
	// StateEncryption is the manager's state key provider (nil: none; stateencryption.go).
	StateEncryption *StateEncryption
}

// kind is what differs between TerraformCluster, TerraformMachine and TerraformMachinePool.
type kind[T capi.Object] interface {
	// workspace returns the object's shared spec and status blocks.
	workspace(obj T) (*captfv1.WorkspaceSpec, *captfv1.WorkspaceStatus, *captfv1.InitializationStatus)
	// mutable is true when changed inputs re-apply (clusters and pools).
	mutable() bool
	// finalizer is the kind's finalizer: the shared plumbing keeps it on every object, and a
	// copy destroying elsewhere is created with it (nsdelete.go).
	finalizer() string
	// roleInputs fills in the role's contract inputs; a non-empty wait says what they lack.
	roleInputs(ctx context.Context, e *engine, p *pass[T], src *inputs.Source) (wait string, err error)
	// applyOutputs writes what the module reported onto the object.
	applyOutputs(p *pass[T], out *outputs.Result)
	// dependents lists what must be deleted before the object (a cluster's machines and pools).
	dependents(ctx context.Context, e *engine, p *pass[T]) ([]string, error)
	// maxActiveJobs is the object's own cap on its cluster's active Jobs (clusters), nil for
	// none.
	maxActiveJobs(obj T) *int32
	// membershipInterval is how often the object's instances are refreshed (pools), 0 for
	// never.
	membershipInterval(obj T) time.Duration
	// setStatus sets what only the kind reports, from what the pass recorded.
	setStatus(p *pass[T])
	// readyCountsApplies is true when Ready keeps counting applies after provisioning (pools: a
	// failed re-apply leaves the group at the wrong size).
	readyCountsApplies() bool
}

// reconcileScope is what the shared plumbing hands the engine for one reconcile: the object,
// its CAPI owners, and the pass its phases record (capi.Scope.Observed).
type reconcileScope[T capi.Object] = capi.Scope[T, *pass[T]]

// pass is one reconcile's record: phases fill it in, in order, and status is computed from it
// at the end. Each field says which phase sets it.
type pass[T capi.Object] struct {
	scope  *reconcileScope[T]
	owner  jobs.Owner
	spec   *captfv1.WorkspaceSpec
	status *captfv1.WorkspaceStatus
	init   *captfv1.InitializationStatus
	policy jobs.Policy

	// newPass (machines and pools): the cluster's TerraformCluster, nil for other providers
	tfCluster *captfv1.TerraformCluster
	// listJobs
	jobList []batchv1.Job
	active  *batchv1.Job
	// readState
	snap        *state.Snapshot
	stateErr    error
	lock        state.Lock
	lockForeign bool
	unlockID    string
	backups     []state.BackupSet
	// copyOffsite (with --offsite-backup-url): what the copies came to
	offsite *offsiteOutcome
	// readOutputs
	outputs           *outputs.Result
	providerIDChanged bool
	endpointChanged   string // clusters: what differs from the write-once endpoint
	// renderInputs
	rendered   *inputs.Rendered
	stored     *inputs.Stored
	inputsWait string
	inputsErr  error
	scaling    *poolScaling // pools: who sizes the pool
	// holdExports (pools): the exports record and the held change
	exportsHold *exportsHold
	// watchPodless: admission refuses the running Job's Pods
	podsRefused *podRefusal
	// findPlan: the plan the decision weighs (pendingPlan: its TerraformPlan, if any), and
	// the names of all the object's TerraformPlans (the next Job's name must not name one)
	plan        *decide.Plan
	pendingPlan *captfv1.TerraformPlan
	planNames   map[string]bool
	// approvalsUnenforced: why the plan's approval is not honoured now ("": it is)
	approvalsUnenforced string
	// countSlots
	slots    decide.Slots
	slotsErr error
	// decide: what Next was asked and what it answered (checkStart and act may observe more
	// and ask again)
	input    decide.Input
	decision decide.Decision
	// checkStart, once an operation is due: why its Job could not start (nil: it could)
	policyErr      error
	accountInvalid string
	backupErr      error
	leaseWait      *leases.Wait
	lastRefusal    *refusal
	// act
	started *batchv1.Job
	// trackActiveJob, start: block-move as this pass last wrote it (nil: as read)
	blockMove *bool
	// dependents (clusters, while deleting)
	dependents []string
	// observeNamespace (deleting): the namespace is being deleted, its destroy namespace, the
	// copy that destroys elsewhere (nil: none yet), and what the Deleting condition says of them
	terminating      *decide.Terminating
	destroyNamespace string
	destroyCopy      client.Object
	nsMessage        string

	// act (deleting): the finalizer may go
	done bool

	// requeue is the earliest time to look again.
	requeue time.Duration
}

func (p *pass[T]) requeueAfter(d time.Duration) {
	if d > 0 && (p.requeue == 0 || d < p.requeue) {
		p.requeue = d
	}
}

func (p *pass[T]) result() ctrl.Result { return ctrl.Result{RequeueAfter: p.requeue} }

// phase is one step of a reconcile.
type phase[T capi.Object] func(ctx context.Context, p *pass[T]) error

// whileIdle runs phases only while none of the object's Jobs runs: they read the state (which
// the Job may be writing) or tidy what a Job may still use. While a Job runs, the decision
// (decide.Next: the running Job owns the object) is all that follows.
func whileIdle[T capi.Object](phases ...phase[T]) phase[T] {
	return func(ctx context.Context, p *pass[T]) error {
		if p.active != nil {
			return nil
		}
		return run(ctx, p, phases...)
	}
}

// run runs phases in order until one fails.
func run[T capi.Object](ctx context.Context, p *pass[T], phases ...phase[T]) error {
	for _, ph := range phases {
		if err := ph(ctx, p); err != nil {
			return err
		}
	}
	return nil
}
