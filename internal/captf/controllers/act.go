package controllers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/decide"
	"github.com/capx-io/capx/internal/captf/inputs"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/leases"
	"github.com/capx-io/capx/internal/captf/state"
)

// act carries out the decision: start a Job, let the finalizer go (after cleaning up), retain,
// claim a waiting operation's leases, or nothing (a wait). It decides nothing: what it meets
// while starting (a lease taken since checkStart read it, a refusal at admission) is recorded
// as an observation and Next is asked again; anything else is an error.
func (r *provider[T]) act(ctx context.Context, p *pass[T]) error {
	d := p.decision
	if d.Finalize || d.Retain {
		r.refusals.forget(p.owner.UID) // the object goes; nothing of it is remembered
	}
	switch {
	case d.Finalize:
		if err := r.cleanup(ctx, p); err != nil {
			return err
		}
		r.recorder.Event(p.scope.Object, corev1.EventTypeNormal, "Destroyed", "Nothing left to destroy; removing the finalizer")
		p.done = true
	case d.Retain:
		if err := r.retain(ctx, p); err != nil {
			return err
		}
		r.recorder.Event(p.scope.Object, corev1.EventTypeNormal, "InfrastructureRetained",
			"deletionPolicy Retain: the infrastructure and its state Secrets were kept, labelled "+
				captfv1.RetainedFromUIDLabel+"="+string(p.owner.UID))
		p.done = true
	case d.ClaimLeases:
		return r.claimLeases(ctx, p)
	case d.Relocate:
		return r.relocate(ctx, p)
	case d.CheckStart:
		return fmt.Errorf("%s was decided without checking what its start needs", d.Op)
	case d.Starts():
		return r.start(ctx, p)
	}
	return nil
}

// claimLeases takes the leases of the operation that waits for them (a cluster's mutating
// operation waiting for its members' Jobs), without starting its Job: members that would start
// later see the cluster's lease and wait (writers are preferred).
func (r *provider[T]) claimLeases(ctx context.Context, p *pass[T]) error {
	op := p.decision.Pending
	hash := p.input.InputsHash
	if op == captfv1.OperationDestroy && p.stored != nil && p.stored.Rendered != nil {
		hash = p.stored.Rendered.Hash // a destroy runs with the inputs that were applied
	}
	if op == captfv1.OperationRestore {
		if b := r.backupOf(p, p.decisionRestoreSerial()); b != nil {
			hash = b.InputsHash
		}
	}
	holder := jobs.Params{Owner: p.owner, Op: string(op), InputsHash: hash, Attempt: nextAttempt(p.owner, p.jobList, p.planNames, op, hash)}.Name()
	_, err := r.acquireLeases(ctx, p, holder, op)
	return err
}

// leaseLost records a lease that act found taken although checkStart read it free, and asks
// Next again with it.
func (r *provider[T]) leaseLost(ctx context.Context, p *pass[T], w *leases.Wait) {
	l := &p.input.Start.Leases
	switch w.Reason {
	case captfv1.WaitingForClusterOperationReason:
		l.ClusterHeld = true
	case captfv1.WaitingForMachineOperationsReason:
		l.MembersBusy = true
	default:
		l.RunHeld = true
	}
	p.leaseWait = w
	r.ask(ctx, p)
	if p.decision.Starts() {
		// Not expected (the wait names a lease Next weighs); never start without the lease.
		p.decision = decide.Decision{Reason: w.Reason, Wait: true, Pending: p.decision.Op}
	}
}

// start starts the decided operation's Job: the leases first (the Job's name is their holder),
// then the durable inputs, the Job, and the per-run Secret the Job mounts.
func (r *provider[T]) start(ctx context.Context, p *pass[T]) error {
	d := p.decision
	rendered := p.rendered
	if d.Op == captfv1.OperationDestroy && p.stored != nil {
		rendered = p.stored.Rendered // a destroy runs with the inputs that were applied
	}
	if rendered == nil {
		return fmt.Errorf("no inputs to run %s with", d.Op)
	}
	params := jobs.Params{
		Owner: p.owner, Op: string(d.Op),
		InputsHash:        rendered.Hash,
		Policy:            p.policy,
		ManagerImage:      r.opts.RunnerImage,
		Source:            p.spec.Source,
		CredentialsSecret: r.credentialsSecret(p),
		ForceUnlock:       p.unlockID,
		ExpectPlan:        d.ExpectPlan,
	}
	if d.Op == captfv1.OperationApply {
		params.Guard = &jobs.Guard{Hash: rendered.Hash}
	}
	if d.Op == captfv1.OperationRestore {
		b := r.backupOf(p, p.decisionRestoreSerial())
		if b == nil {
			return fmt.Errorf("no backup of serial %d to restore", p.decisionRestoreSerial())
		}
		// checkStart verified it in this pass; the runner checks its digest again.
		params.Restore = &jobs.Restore{Serial: b.Serial, Chunks: b.Chunks, Resources: b.Resources, Digest: b.Digest}
		params.InputsHash = b.InputsHash
	}
	if d.ExpectPlan != "" {
		sp, err := r.approvedSavedPlan(ctx, p, d.PlanName, d.ExpectPlan)
		if err != nil {
			return err
		}
		params.SavedPlan = sp
	}
	enc, err := jobEncryption(p.spec.StateEncryption, p.snap != nil && p.snap.Encrypted, r.opts.StateEncryption)
	if err != nil {
		return fmt.Errorf("refusing to start a Job that could not read its state: %w", err)
	}
	params.StateEncryption = enc
	params.Attempt = nextAttempt(p.owner, p.jobList, p.planNames, d.Op, params.InputsHash)
	if err := params.Validate(); err != nil {
		return fmt.Errorf("refusing to start a Job its runner would refuse: %w", err)
	}
	name := params.Name()

	if wait, err := r.acquireLeases(ctx, p, name, d.Op); err != nil {
		return err
	} else if wait != nil {
		r.leaseLost(ctx, p, wait)
		return nil
	}
	if err := r.ensureLockAccess(ctx, p); err != nil {
		return r.startFailed(ctx, p, name, err)
	}
	if err := r.keepForDestroy(ctx, p, readsOf(params.CredentialsSecret, p.policy)); err != nil {
		return r.startFailed(ctx, p, name, err)
	}
	// The durable inputs are what a destroy runs with: an apply may change the infrastructure,
	// a plan never does, so only an apply replaces them.
	if d.Op == captfv1.OperationApply {
		if _, err := inputs.EnsureApply(ctx, r.client, p.owner, rendered); err != nil { // marks a pool's exports record pending
			return r.startFailed(ctx, p, name, err)
		}
	}
	job := jobs.Build(params)
	if d.PlanName != "" {
		job.Annotations[captfv1.PlanAnnotation] = d.PlanName
	}
	// Admission (a ResourceQuota, a policy) may refuse the Job: a dry run asks first, so a
	// refusal writes nothing to the object. Setting and clearing block-move on every attempt
	// would itself bring the object back at once, retrying in a loop.
	if err := r.client.Create(ctx, job.DeepCopy(), client.DryRunAll); err != nil && !apierrors.IsAlreadyExists(err) {
		return r.startFailed(ctx, p, name, err)
	}
	if err := r.dryRunPod(ctx, job); err != nil { // its Pods are admitted too (podrefusal.go)
		return r.startFailed(ctx, p, name, err)
	}
	// The run Secret comes before the Job, owned by the object until the Job exists: a Job is
	// never without the Secret its Pod mounts (a crash or a failed write in between would
	// leave the Pod waiting for its volume until the deadline).
	if err := r.writeRunSecret(ctx, p, job, rendered); err != nil {
		return r.startFailed(ctx, p, name, err)
	}
	if err := r.setBlockMove(ctx, p, true); err != nil {
		return r.startFailed(ctx, p, name, err) // no Job follows: the leases go back now
	}
	if err := r.client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		// No Job runs, so nothing may block a move (nor flip the annotation on every retry).
		if berr := r.setBlockMove(ctx, p, false); berr != nil {
			ctrl.LoggerFrom(ctx).Error(berr, "Clearing block-move after a refused Job")
		}
		return r.startFailed(ctx, p, name, err)
	}
	// From here on the Job exists: its leases stay taken whatever fails (bookkeeping releases
	// them once it has finished), and the next pass finishes what this one could not.
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
		if err := r.reader.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return err
		}
	}
	if err := r.ownRunSecret(ctx, job); err != nil {
		return err
	}
	if _, err := inputs.EnsureRun(ctx, r.client, job, rendered); err != nil {
		return err
	}
	p.started = job
	r.refusals.forget(p.owner.UID)
	p.status.ActiveJob = &captfv1.JobReference{Name: job.Name, Operation: d.Op}
	r.recorder.Eventf(p.scope.Object, corev1.EventTypeNormal, "JobStarted", "Started %s Job %s (%s)", d.Op, job.Name, d.Reason)
	if msg := unappliedImage(d.Op, p.snap, p.spec.Source.Image, job.Name); msg != "" {
		r.recorder.Event(p.scope.Object, corev1.EventTypeWarning, "DestroyWithUnappliedImage", msg)
	}
	ctrl.LoggerFrom(ctx).Info("Started a Job", "job", job.Name, "op", d.Op, "reason", d.Reason)
	return nil
}

// unappliedImage says, for a destroy that runs a module image which never applied the state
// (spec.source.image changed after the newest apply, and no apply of it ran), what the Warning
// says; "" for every other Job. A state from before the image was recorded says nothing.
func unappliedImage(op captfv1.Operation, applied *state.Snapshot, image, job string) string {
	if op != captfv1.OperationDestroy || applied == nil || applied.Image == "" || applied.Image == image {
		return ""
	}
	return fmt.Sprintf("Destroy Job %s runs module image %s, which never applied this state (the newest apply ran %s)", job, image, applied.Image)
}

// decisionRestoreSerial is the serial the captf.io/restore-state annotation asks for.
func (p *pass[T]) decisionRestoreSerial() int64 {
	v, _ := strconv.ParseInt(p.scope.Object.GetAnnotations()[captfv1.RestoreStateAnnotation], 10, 64)
	return v
}

// writeRunSecret creates the per-run Secret of a Job about to be created, owned by the object
// (the Job has no UID yet). One left by an earlier pass that crashed is the same Secret: the
// name derives from the Job's, and the Job's from its inputs.
func (r *provider[T]) writeRunSecret(ctx context.Context, p *pass[T], job *batchv1.Job, rendered *inputs.Rendered) error {
	s := inputs.RunSecret(job, rendered)
	s.OwnerReferences = []metav1.OwnerReference{p.owner.ControllerRef()}
	if err := r.client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create run Secret %s: %w", s.Name, err)
	}
	return nil
}

// ownRunSecret hands a Job's run Secret to the Job, so the garbage collector deletes it with
// the Job. A pass that crashed before doing so leaves it to the next pass that sees the Job
// running (trackActiveJob).
func (r *provider[T]) ownRunSecret(ctx context.Context, job *batchv1.Job) error {
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: job.Namespace, Name: jobs.RunSecretName(job.Name)}
	if err := r.client.Get(ctx, key, s); apierrors.IsNotFound(err) {
		err = r.reader.Get(ctx, key, s)
		if apierrors.IsNotFound(err) {
			return nil // EnsureRun creates it
		}
		if err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	want := []metav1.OwnerReference{{
		APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job", Name: job.Name, UID: job.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	if len(s.OwnerReferences) == 1 && s.OwnerReferences[0].UID == job.UID {
		return nil
	}
	before := s.DeepCopy()
	s.OwnerReferences = want
	if err := r.client.Patch(ctx, s, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("hand run Secret %s to Job %s: %w", s.Name, job.Name, err)
	}
	return nil
}

// startFailed gives the leases back when a Job could not be started (and the run Secret written
// for it), and tells a quota refusal apart (it has its own condition reason). It is called
// only while the Job does not exist.
func (r *provider[T]) startFailed(ctx context.Context, p *pass[T], holder string, err error) error {
	// A Job of that name may exist all the same (an earlier pass created it and the cache has
	// not seen it yet, and admission refused this pass's dry run): then it keeps its leases
	// and its run Secret.
	existing := &batchv1.Job{}
	if gerr := r.reader.Get(ctx, client.ObjectKey{Namespace: p.owner.Namespace, Name: holder}, existing); !apierrors.IsNotFound(gerr) {
		if gerr != nil {
			return errors.Join(err, gerr)
		}
		return err
	}
	run := &corev1.Secret{}
	run.Namespace, run.Name = p.owner.Namespace, jobs.RunSecretName(holder)
	if derr := r.client.Delete(ctx, run); client.IgnoreNotFound(derr) != nil {
		ctrl.LoggerFrom(ctx).Error(derr, "Deleting the run Secret after a failed start")
	}
	if rerr := r.releaseLeases(ctx, p, holder); rerr != nil {
		ctrl.LoggerFrom(ctx).Error(rerr, "Releasing leases after a failed start")
	}
	if reason := startRefusal(err); reason != "" { // a quota, or a refusal of the Job's Pods (podrefusal.go)
		// An observation: the next start of this object waits on it (decide.Start.LastRefusal).
		rf := &refusal{reason: reason, at: r.clock.Now(), err: err}
		r.refusals.set(p.owner.UID, rf)
		p.lastRefusal = rf
		p.input.Start.LastRefusal = &decide.Refusal{Reason: rf.reason, At: rf.at}
		r.ask(ctx, p)
		return nil
	}
	return err
}

// refusals remembers, per object, the newest Job the API server refused at admission, which
// the object's next start waits on. It is kept in memory only: a restarted manager asks the
// API server once more, which costs one refused dry run. A nil refusals remembers nothing.
type refusals struct {
	mu sync.Mutex
	m  map[types.UID]*refusal
}

// refusal is a Job the API server refused to create.
type refusal struct {
	reason string
	at     time.Time
	err    error
}

func newRefusals() *refusals { return &refusals{m: map[types.UID]*refusal{}} }

func (r *refusals) get(uid types.UID) *refusal {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[uid]
}

func (r *refusals) set(uid types.UID, rf *refusal) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[uid] = rf
}

func (r *refusals) forget(uid types.UID) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, uid)
}

// isQuotaError recognises the quota admission plugin's refusals: "exceeded quota", and the
// "status unknown for quota" and "failed quota" it answers while the quota controller has not
// counted a new quota yet or a request lacks what the quota constrains.
func isQuotaError(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	msg := status.Status().Message
	for _, s := range []string{"exceeded quota", "status unknown for quota", "failed quota", "ResourceQuota"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// credentialsSecret is the object's credentials Secret, else its cluster's default, else the
// cluster's own.
func (r *provider[T]) credentialsSecret(p *pass[T]) string {
	if p.spec.CredentialsRef != nil {
		return p.spec.CredentialsRef.Name
	}
	if tc := p.tfCluster; tc != nil {
		if tc.Spec.Defaults != nil && tc.Spec.Defaults.CredentialsRef != nil {
			return tc.Spec.Defaults.CredentialsRef.Name
		}
		if tc.Spec.CredentialsRef != nil {
			return tc.Spec.CredentialsRef.Name
		}
	}
	return ""
}

// countSlots counts the active Jobs against the manager-wide and the cluster's caps. Jobs that
// cannot be counted count as a reached cap (decide.Slots.Uncounted): a cap never opens on an
// error.
func (r *provider[T]) countSlots(ctx context.Context, p *pass[T]) error {
	p.slots, p.slotsErr = r.slots(ctx, p)
	if p.slotsErr != nil {
		ctrl.LoggerFrom(ctx).Error(p.slotsErr, "Counting active Jobs failed; no Job starts until they are counted")
	}
	return nil
}

// slots reports whether the manager-wide, the namespace's or the cluster's cap on active Jobs is
// reached (Full, with the cap named in Reached), or 80% of one (Busy: background work waits), and
// whether the manager-wide budget of drift Jobs is used up (DriftFull). A cluster's own cap
// (spec.maxActiveJobs) never goes above its namespace's. One listing of the cached active Jobs
// counts them all.
func (r *provider[T]) slots(ctx context.Context, p *pass[T]) (decide.Slots, error) {
	o := r.opts
	ns, nsCap := p.owner.Namespace, o.NamespaceMaxActiveJobs
	limit, source := o.ClusterMaxActiveJobs, "--cluster-max-active-jobs"
	if tc := p.tfCluster; tc != nil && tc.Spec.MaxActiveJobs != nil {
		limit, source = int(*tc.Spec.MaxActiveJobs), "spec.maxActiveJobs of TerraformCluster "+tc.Name
	} else if own := r.kind.maxActiveJobs(p.scope.Object); own != nil {
		limit, source = int(*own), "its spec.maxActiveJobs"
	}
	if nsCap > 0 && limit > nsCap {
		source += fmt.Sprintf(", %d, is above the namespace's cap and counts as %d", limit, nsCap)
		limit = nsCap
	}
	if p.owner.ClusterName == "" {
		limit = 0
	}
	if o.MaxActiveJobs <= 0 && nsCap <= 0 && limit <= 0 && o.MaxConcurrentDriftJobs <= 0 {
		return decide.Slots{}, nil
	}
	n, err := r.countActive(ctx, ns, p.owner.ClusterName)
	if err != nil {
		return decide.Slots{Uncounted: true}, err
	}
	var s decide.Slots
	check := func(active, limit int, name string) {
		if limit <= 0 {
			return
		}
		if active >= limit && !s.Full {
			s.Full, s.Reached = true, name
		}
		s.Busy = s.Busy || active*5 >= limit*4
	}
	check(n.all, o.MaxActiveJobs, fmt.Sprintf("the manager-wide cap of %d active Jobs (--max-active-jobs)", o.MaxActiveJobs))
	check(n.namespace, nsCap, fmt.Sprintf("namespace %s's cap of %d active Jobs (--namespace-max-active-jobs)", ns, nsCap))
	check(n.cluster, limit, fmt.Sprintf("cluster %s's cap of %d active Jobs (%s)", p.owner.ClusterName, limit, source))
	s.DriftFull = o.MaxConcurrentDriftJobs > 0 && n.drift >= o.MaxConcurrentDriftJobs
	return s, nil
}

// activeJobs are the running CAPTF Jobs the caps count.
type activeJobs struct {
	all, namespace, cluster int
	// drift counts the drift Jobs among all (the manager-wide drift budget).
	drift int
}

// countActive counts the running CAPTF Jobs in the cache: all of them, the namespace's, the
// cluster's (of that namespace; none for "") and the drift checks among all. It reads the
// running Jobs only (activeJobIndex), as the cache holds them: they are read, never changed.
func (r *provider[T]) countActive(ctx context.Context, ns, cluster string) (activeJobs, error) {
	list := &batchv1.JobList{}
	if err := r.client.List(ctx, list, client.MatchingFields{activeJobIndex: "true"}, client.UnsafeDisableDeepCopy); err != nil {
		return activeJobs{}, fmt.Errorf("count active Jobs: %w", err)
	}
	var n activeJobs
	for i := range list.Items {
		j := &list.Items[i]
		n.all++
		if j.Labels[captfv1.OperationLabel] == string(captfv1.OperationDrift) {
			n.drift++
		}
		if j.Namespace == ns {
			n.namespace++
			if cluster != "" && j.Labels[clusterLabel] == cluster {
				n.cluster++
			}
		}
	}
	return n, nil
}

// findDependents (clusters) lists what must be deleted first.
func (r *provider[T]) findDependents(ctx context.Context, p *pass[T]) error {
	deps, err := r.kind.dependents(ctx, r.engine, p)
	p.dependents = deps
	return err
}

// cleanup removes what the object owned once nothing is left to destroy: the backups, the
// durable inputs, the plan key, the leases, a copy that destroyed elsewhere, and last the state
// Secrets and lock. The manager deletes them itself: the garbage collector and the namespace
// controller may not (config/admission/captf-state-protection.yaml). The state goes last: a pass
// that stops half-way leaves a state that still says nothing is left (or that the copy
// destroyed it), and the next pass finishes the cleanup; without it, the object would look
// applied with its state lost.
func (r *provider[T]) cleanup(ctx context.Context, p *pass[T]) error {
	if err := state.DeleteBackups(ctx, r.client, r.reader, p.owner.Namespace, p.owner.StateSuffix()); err != nil {
		return err
	}
	for _, name := range []string{inputs.SecretName(p.owner), planKeyName(p.owner)} {
		s := &corev1.Secret{}
		s.Namespace, s.Name = p.owner.Namespace, name
		if err := r.client.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	if err := r.releaseKept(ctx, p); err != nil {
		return err
	}
	if err := r.releaseLeases(ctx, p, ""); err != nil {
		return err
	}
	if err := r.releaseCopy(ctx, p); err != nil {
		return err
	}
	r.states.forget(p.owner.Namespace, p.owner.StateSuffix())
	return state.Delete(ctx, r.client, r.reader, p.owner.Namespace, p.owner.StateSuffix())
}

// retain keeps the infrastructure: the state, backups and durable inputs lose their owner
// reference and are labelled with the object's UID, so nothing is garbage-collected and a new
// object of the same name does not silently take them over.
func (r *provider[T]) retain(ctx context.Context, p *pass[T]) error {
	if err := state.Retain(ctx, r.client, r.reader, p.owner.Namespace, p.owner.StateSuffix(), p.owner.UID, inputs.SecretName(p.owner)); err != nil {
		return err
	}
	s := &corev1.Secret{}
	s.Namespace, s.Name = p.owner.Namespace, planKeyName(p.owner)
	if err := r.client.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
		return err
	}
	if err := r.releaseKept(ctx, p); err != nil {
		return err
	}
	return r.releaseLeases(ctx, p, "")
}
