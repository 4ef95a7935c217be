// Package leases coordinates the Jobs of CAPTF objects with Kubernetes Leases, so that at most
// one Job of an object runs at a time (the run lease, one per object) and a cluster's mutating
// operation never overlaps a mutating operation of its machines and pools (the cluster lease,
// taken under the operation gate).
//
// A lease names the Job about to be created as its holder: Job names are deterministic, so a
// reconcile that crashed between taking a lease and creating the Job takes its own lease
// again. Each lease has one taker (its object; a cluster's operation lease, the
// TerraformCluster), whose passes never overlap: to its taker, a lease whose holder Job does not
// exist is free at once (nothing is about to create it), unless a Pod of that Job still stops.
// To anyone else reading it, such a lease is free after a one-minute grace (its taker may be
// creating the Job right now). A lease whose holder finished is free at once; every lease is free
// after a backstop well past the holder's deadline, so a lost release never blocks an object for
// good. A Take that ends without a Job to follow (an error) gives back what it took.
//
// Leases are always read live (never from a cache) and written with the resourceVersion just
// read: two reconciles that race for a lease cannot both win, and the loser waits for the next
// reconcile instead of retrying in the same pass.
package leases

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/jobs"
)

// Kinds of leases, the value of the captf.io/lease label.
const (
	KindRun     = "run"
	KindCluster = "cluster"
)

const (
	// Grace is how long a lease whose holder Job does not exist stays taken: the time a
	// reconcile may need between taking the lease and creating the Job.
	Grace = time.Minute
	// backstopSlack is added to the holder's deadline: its Pod's termination grace period and
	// five minutes more for the manager to notice.
	backstopSlack = 600*time.Second + 300*time.Second
	// maxNamed bounds the Jobs a wait message names.
	maxNamed = 5
)

// RunLeaseName is the run lease of an object, named by its state suffix (which, unlike the
// object's name, always fits).
func RunLeaseName(o jobs.Owner) string { return "captf-run-" + o.StateSuffix() }

// ClusterLeaseName is the operation lease of a CAPI cluster.
func ClusterLeaseName(namespace, cluster string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + cluster))
	return "captf-cluster-" + hex.EncodeToString(sum[:])[:16]
}

// Mutating reports whether an operation changes infrastructure or state: only these take part
// in the operation gate.
func Mutating(op string) bool {
	return op == contract.OpApply || op == contract.OpDestroy || op == contract.OpRestore
}

// Request asks for the leases a Job needs before it is created.
type Request struct {
	// Owner is the object the Job runs for.
	Owner jobs.Owner
	// Holder is the name of the Job about to be created.
	Holder string
	// Op is the Job's operation.
	Op string
	// ActiveDeadlineSeconds is the Job's deadline; the lease's backstop is this plus 900 s.
	ActiveDeadlineSeconds int64
	// Gate enables the cluster operation gate (the manager's --cluster-operation-gate).
	Gate bool
}

// Wait says why a Job cannot start now. Waiting is not a failure: the caller sets the
// operation's condition Unknown with Reason and Message and requeues.
type Wait struct {
	// Reason is captfv1.WaitingForRunLeaseReason, WaitingForClusterOperationReason or
	// WaitingForMachineOperationsReason.
	Reason string
	// Message names the lease and the Jobs waited for.
	Message string
	// Holders are the Jobs waited for (all of them; Message names at most five).
	Holders []string
}

// Leases takes and gives back leases.
type Leases struct {
	client client.Client
	reader client.Reader
	clock  clock.PassiveClock
}

// New returns Leases that write through c and read through reader, which must read live from
// the API server (the manager's API reader), and tell time by clk.
func New(c client.Client, reader client.Reader, clk clock.PassiveClock) *Leases {
	return &Leases{client: c, reader: reader, clock: clk}
}

// Take takes the leases a Job needs; call it just before creating the Job (a lease whose Job
// does not appear within Grace may be taken by another). It returns nil when the Job may be
// created, or why it must wait. The operation gate is write-before-read on both sides: a
// cluster writes its lease and then reads its machines' and pools' leases, a machine or pool
// writes its lease and then reads the cluster's, so of two that start together at least one
// sees the other. A cluster that sees running members keeps its leases while it waits, so
// members that come later wait for it (writers are preferred); a member that sees the cluster
// gives its lease back.
func (l *Leases) Take(ctx context.Context, req Request) (*Wait, error) {
	o := req.Owner
	run := RunLeaseName(o)
	if w, err := l.acquire(ctx, run, KindRun, req); w != nil || err != nil {
		return w, err
	}
	if !req.Gate || o.ClusterName == "" {
		return nil, nil
	}
	cluster := ClusterLeaseName(o.Namespace, o.ClusterName)
	if o.Kind == captfv1.KindCluster {
		if !Mutating(req.Op) {
			return nil, nil
		}
		if w, err := l.acquire(ctx, cluster, KindCluster, req); w != nil || err != nil {
			if err != nil {
				err = errors.Join(err, l.release(ctx, o.Namespace, run, req.Holder))
			}
			return w, err
		}
		w, err := l.waitForMembers(ctx, o)
		if err != nil {
			// A wait keeps both leases (writers are preferred); an error starts nothing.
			err = errors.Join(err, l.Release(ctx, o, req.Holder))
		}
		return w, err
	}
	lease, live, err := l.read(ctx, o.Namespace, cluster)
	if err != nil {
		// No Job follows this Take: the run lease goes back now, not after a grace.
		return nil, errors.Join(err, l.release(ctx, o.Namespace, run, req.Holder))
	}
	if !live {
		return nil, nil
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if err := l.release(ctx, o.Namespace, run, req.Holder); err != nil {
		return nil, err
	}
	return &Wait{
		Reason:  captfv1.WaitingForClusterOperationReason,
		Message: fmt.Sprintf("Waiting for the TerraformCluster's Job %s to finish (Lease %s)", holder, cluster),
		Holders: []string{holder},
	}, nil
}

// Release gives back the leases holder took for the object: its run lease and, for a
// cluster, the cluster lease. A lease someone else holds is left alone.
func (l *Leases) Release(ctx context.Context, o jobs.Owner, holder string) error {
	if err := l.release(ctx, o.Namespace, RunLeaseName(o), holder); err != nil {
		return err
	}
	if o.Kind == captfv1.KindCluster && o.ClusterName != "" {
		return l.release(ctx, o.Namespace, ClusterLeaseName(o.Namespace, o.ClusterName), holder)
	}
	return nil
}

// acquire creates the lease, or takes the existing one when it is free or already ours.
func (l *Leases) acquire(ctx context.Context, name, kind string, req Request) (*Wait, error) {
	want := l.lease(name, kind, req)
	err := l.client.Create(ctx, want)
	if err == nil {
		return nil, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("leases: create Lease %s/%s: %w", want.Namespace, name, err)
	}
	have := &coordinationv1.Lease{}
	if err := l.reader.Get(ctx, client.ObjectKeyFromObject(want), have); err != nil {
		if apierrors.IsNotFound(err) {
			return lost(name), nil
		}
		return nil, fmt.Errorf("leases: read Lease %s/%s: %w", want.Namespace, name, err)
	}
	holder := ptr.Deref(have.Spec.HolderIdentity, "")
	if holder == req.Holder && l.clock.Since(acquiredAt(have)) < Grace/2 {
		// Ours and fresh: the Job can still be created within the grace.
		return nil, nil
	}
	if holder != req.Holder {
		if w, err := l.holds(ctx, have); w != nil || err != nil {
			return w, err
		}
	}
	// Taken with the resourceVersion just read: a concurrent taker makes this a conflict.
	have.Labels, have.Annotations, have.OwnerReferences, have.Spec = want.Labels, want.Annotations, want.OwnerReferences, want.Spec
	if err := l.client.Update(ctx, have); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return lost(name), nil
		}
		return nil, fmt.Errorf("leases: take Lease %s/%s: %w", have.Namespace, name, err)
	}
	return nil, nil
}

func lost(name string) *Wait {
	return &Wait{
		Reason:  captfv1.WaitingForRunLeaseReason,
		Message: fmt.Sprintf("Lease %s changed while it was being taken; trying again at the next reconcile", name),
	}
}

// lease is the Lease a request takes.
func (l *Leases) lease(name, kind string, req Request) *coordinationv1.Lease {
	now := l.clock.Now()
	labels := req.Owner.MoveLabels()
	labels[captfv1.LeaseLabel] = kind
	backstop := time.Duration(req.ActiveDeadlineSeconds)*time.Second + backstopSlack
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: req.Owner.Namespace,
			Name:      name,
			Labels:    labels,
			Annotations: map[string]string{
				captfv1.LeaseOpAnnotation:         req.Op,
				captfv1.LeaseAcquiredAtAnnotation: now.UTC().Format(time.RFC3339Nano),
			},
			OwnerReferences: []metav1.OwnerReference{req.Owner.ControllerRef()},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(req.Holder),
			LeaseDurationSeconds: ptr.To(int32(backstop / time.Second)),
			AcquireTime:          ptr.To(metav1.NewMicroTime(now)),
			RenewTime:            ptr.To(metav1.NewMicroTime(now)),
		},
	}
}

// read returns a lease and whether it is live (not free); a missing lease is not live.
func (l *Leases) read(ctx context.Context, namespace, name string) (*coordinationv1.Lease, bool, error) {
	lease := &coordinationv1.Lease{}
	if err := l.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, lease); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("leases: read Lease %s/%s: %w", namespace, name, err)
	}
	free, err := l.free(ctx, lease)
	return lease, !free, err
}

// holds is how a lease looks to its one taker (an object takes its own run lease, a
// TerraformCluster its cluster's operation lease): the Wait it holds that taker's next Job with,
// nil when it may be taken over. The holder Job is read live. One that does not exist was named
// by an earlier pass of the same taker that ended without creating it (a failure between taking
// the lease and creating the Job, a crash, a cluster's claim while its members ran): passes of
// one object never overlap, so nothing is about to create it and no grace is waited out. Only a
// Pod of it still stopping (a Job deleted while it ran, which may be saving the state) holds the
// lease then. Readers that do not take the lease (a cluster weighing its members' run leases, a
// member the cluster's lease) give a missing holder the grace instead (free): its taker may be
// between taking the lease and creating the Job at that very moment.
func (l *Leases) holds(ctx context.Context, lease *coordinationv1.Lease) (*Wait, error) {
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if holder == "" {
		return nil, nil
	}
	job := &batchv1.Job{}
	now := l.clock.Now()
	switch err := l.reader.Get(ctx, client.ObjectKey{Namespace: lease.Namespace, Name: holder}, job); {
	case apierrors.IsNotFound(err):
		if pastBackstop(lease, now) {
			return nil, nil
		}
		alive, err := jobs.PodsAlive(ctx, l.reader, lease.Namespace, holder)
		if err != nil || !alive {
			return nil, err
		}
		return &Wait{
			Reason:  captfv1.WaitingForRunLeaseReason,
			Message: fmt.Sprintf("Waiting for a Pod of Job %s, which is gone, to stop: it may still be saving the state (Lease %s)", holder, lease.Name),
			Holders: []string{holder},
		}, nil
	case err != nil:
		return nil, fmt.Errorf("leases: read Job %s/%s holding Lease %s: %w", lease.Namespace, holder, lease.Name, err)
	}
	if Free(lease, job, now) {
		return nil, nil
	}
	return &Wait{
		Reason:  captfv1.WaitingForRunLeaseReason,
		Message: fmt.Sprintf("Waiting for Job %s, which holds Lease %s, to finish", holder, lease.Name),
		Holders: []string{holder},
	}, nil
}

// free reads the lease's holder Job (live) and decides with Free.
func (l *Leases) free(ctx context.Context, lease *coordinationv1.Lease) (bool, error) {
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if holder == "" {
		return true, nil
	}
	job := &batchv1.Job{}
	if err := l.reader.Get(ctx, client.ObjectKey{Namespace: lease.Namespace, Name: holder}, job); err != nil {
		if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("leases: read Job %s/%s holding Lease %s: %w", lease.Namespace, holder, lease.Name, err)
		}
		job = nil
	}
	now := l.clock.Now()
	if free := Free(lease, job, now); !free || job != nil || pastBackstop(lease, now) {
		// A finished Job is marked so by the Job controller only once its Pods are gone.
		return free, nil
	}
	// The holder Job is gone, but a Pod of a deleted Job may still be stopping, and writing the
	// state: the lease is free only once no Pod of it runs.
	alive, err := jobs.PodsAlive(ctx, l.reader, lease.Namespace, holder)
	if err != nil {
		return false, fmt.Errorf("leases: Lease %s: %w", lease.Name, err)
	}
	return !alive, nil
}

// Free decides whether a lease may be taken over at now: when it has no holder, when it is
// older than its backstop (leaseDurationSeconds), when its holder Job (nil: it does not exist)
// finished, or when the holder Job does not exist and the lease is older than Grace (the
// reconcile that took it crashed before creating the Job, or chose another Job).
func Free(lease *coordinationv1.Lease, holder *batchv1.Job, now time.Time) bool {
	if ptr.Deref(lease.Spec.HolderIdentity, "") == "" {
		return true
	}
	if pastBackstop(lease, now) {
		return true
	}
	if holder == nil {
		return now.Sub(acquiredAt(lease)) > Grace
	}
	return jobs.Classify(holder).Finished()
}

// pastBackstop reports a lease older than its leaseDurationSeconds.
func pastBackstop(lease *coordinationv1.Lease, now time.Time) bool {
	return now.Sub(acquiredAt(lease)) > time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 0))*time.Second
}

// acquiredAt is when the lease was taken; a lease without the time counts as taken long ago.
func acquiredAt(lease *coordinationv1.Lease) time.Time {
	if lease.Spec.AcquireTime != nil {
		return lease.Spec.AcquireTime.Time
	}
	return time.Time{}
}

// waitForMembers lists the run leases of the cluster's machines and pools and returns a wait
// when any of them holds a live mutating operation.
func (l *Leases) waitForMembers(ctx context.Context, o jobs.Owner) (*Wait, error) {
	list := &coordinationv1.LeaseList{}
	if err := l.reader.List(ctx, list, client.InNamespace(o.Namespace), client.MatchingLabels{
		captfv1.LeaseLabel: KindRun, clusterv1.ClusterNameLabel: o.ClusterName, captfv1.ManagedLabel: "true",
	}); err != nil {
		return nil, fmt.Errorf("leases: list run Leases of cluster %s/%s: %w", o.Namespace, o.ClusterName, err)
	}
	var holders []string
	for i := range list.Items {
		lease := &list.Items[i]
		if lease.Labels[captfv1.OwnerKindLabel] == captfv1.KindCluster || !Mutating(lease.Annotations[captfv1.LeaseOpAnnotation]) {
			continue
		}
		free, err := l.free(ctx, lease)
		if err != nil {
			return nil, err
		}
		if !free {
			holders = append(holders, ptr.Deref(lease.Spec.HolderIdentity, ""))
		}
	}
	if len(holders) == 0 {
		return nil, nil
	}
	slices.Sort(holders)
	named := strings.Join(holders[:min(len(holders), maxNamed)], ", ")
	if more := len(holders) - maxNamed; more > 0 {
		named += fmt.Sprintf(" and %d more", more)
	}
	return &Wait{
		Reason:  captfv1.WaitingForMachineOperationsReason,
		Message: fmt.Sprintf("Waiting for %d machine and pool Jobs to finish: %s", len(holders), named),
		Holders: holders,
	}, nil
}

// release deletes a lease held by holder, guarded by its UID and resourceVersion so that a
// lease someone else took in the meantime survives.
func (l *Leases) release(ctx context.Context, namespace, name, holder string) error {
	lease := &coordinationv1.Lease{}
	if err := l.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, lease); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("leases: read Lease %s/%s: %w", namespace, name, err)
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") != holder {
		return nil
	}
	err := l.client.Delete(ctx, lease, client.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("leases: release Lease %s/%s: %w", namespace, name, err)
	}
	return nil
}
