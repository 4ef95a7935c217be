package controllers

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/decide"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/leases"
	"github.com/capx-io/capx/internal/captf/state"
	"github.com/capx-io/capx/internal/scheme"
)

// TestIsQuotaError: the quota admission plugin's refusals, as the API server words them.
func TestIsQuotaError(t *testing.T) {
	jobs := schema.GroupResource{Group: "batch", Resource: "jobs"}
	for msg, want := range map[string]bool{
		"exceeded quota: no-jobs, requested: count/jobs.batch=1, used: count/jobs.batch=0, limited: count/jobs.batch=0": true,
		"status unknown for quota: no-jobs, resources: count/jobs.batch":                                                true,
		"failed quota: compute: must specify limits.memory for: source":                                                 true,
		"jobs.batch is forbidden: User \"x\" cannot create resource \"jobs\"":                                           false,
	} {
		err := apierrors.NewForbidden(jobs, "captf-m-m1-apply-a1-abcdef", errors.New(msg))
		NewWithT(t).Expect(isQuotaError(err)).To(Equal(want), msg)
	}
	NewWithT(t).Expect(isQuotaError(errors.New("exceeded quota"))).To(BeFalse(), "not an API error")
}

// TestJobCapsFailClosed: Jobs that cannot be counted are a reached cap, never an open one.
func TestJobCapsFailClosed(t *testing.T) {
	failing := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme.New()).Build(), interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("the cache is not synced")
		},
	})
	for _, opts := range []EngineOptions{{MaxActiveJobs: 5}, {ClusterMaxActiveJobs: 5}, {MaxConcurrentDriftJobs: 5}} {
		g := NewWithT(t)
		r := &provider[*captfv1.TerraformMachine]{engine: &engine{client: failing, opts: opts}, kind: machineKind{}}
		p := &pass[*captfv1.TerraformMachine]{
			scope: &reconcileScope[*captfv1.TerraformMachine]{Object: &captfv1.TerraformMachine{}},
			owner: jobs.Owner{Kind: "TerraformMachine", Namespace: "ns", Name: "m1", ClusterName: "c1"},
		}
		g.Expect(r.countSlots(context.Background(), p)).To(Succeed())
		g.Expect(p.slots).To(Equal(decide.Slots{Uncounted: true}), "%+v", opts)
		g.Expect(p.slotsErr).To(MatchError(ContainSubstring("the cache is not synced")))
	}
}

// TestSlotsCountTheCaps: one listing of the managed Jobs counts every cap: running Jobs only,
// the namespace's and the cluster's of that namespace, and the drift Jobs of every namespace
// against the manager-wide drift budget.
func TestSlotsCountTheCaps(t *testing.T) {
	job := func(ns, name, cluster string, op captfv1.Operation, done bool) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			captfv1.ManagedLabel: "true", captfv1.OperationLabel: string(op), clusterLabel: cluster}}}
		if done {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: "True"}}
		}
		return j
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		job("ns", "d1", "c1", captfv1.OperationDrift, false),
		job("ns", "d2", "c2", captfv1.OperationDrift, false),
		job("other", "d3", "c1", captfv1.OperationDrift, false), // another namespace's c1
		job("ns", "a1", "c1", captfv1.OperationApply, false),
		job("ns", "d4", "c1", captfv1.OperationDrift, true), // finished: counts nowhere
	).WithIndex(&batchv1.Job{}, activeJobIndex, activeJobKeys).Build()
	slots := func(opts EngineOptions) decide.Slots {
		r := &provider[*captfv1.TerraformMachine]{engine: &engine{client: c, opts: opts}, kind: machineKind{}}
		p := &pass[*captfv1.TerraformMachine]{
			scope: &reconcileScope[*captfv1.TerraformMachine]{Object: &captfv1.TerraformMachine{}},
			owner: jobs.Owner{Kind: "TerraformMachine", Namespace: "ns", Name: "m1", ClusterName: "c1"},
		}
		s, err := r.slots(context.Background(), p)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		return s
	}
	g := NewWithT(t)
	g.Expect(slots(EngineOptions{})).To(Equal(decide.Slots{}), "no caps, nothing counted")
	g.Expect(slots(EngineOptions{MaxConcurrentDriftJobs: 3})).To(Equal(decide.Slots{DriftFull: true}), "3 drift Jobs run, in two namespaces")
	g.Expect(slots(EngineOptions{MaxConcurrentDriftJobs: 4})).To(Equal(decide.Slots{}), "one drift Job left in the budget")
	g.Expect(slots(EngineOptions{MaxActiveJobs: 5})).To(Equal(decide.Slots{Busy: true}), "4 of 5 run")
	g.Expect(slots(EngineOptions{MaxActiveJobs: 4}).Reached).To(ContainSubstring("manager-wide cap of 4"))
	g.Expect(slots(EngineOptions{NamespaceMaxActiveJobs: 3}).Reached).To(ContainSubstring("namespace ns's cap of 3"))
	g.Expect(slots(EngineOptions{ClusterMaxActiveJobs: 2}).Reached).To(ContainSubstring("cluster c1's cap of 2"), "d1 and a1")
	g.Expect(slots(EngineOptions{ClusterMaxActiveJobs: 3})).To(Equal(decide.Slots{}), "2 of 3 is under 80%")
}

// TestInputCarriesTheObservations: what the phases recorded reaches decide.Input, the running
// Job first of all.
func TestInputCarriesTheObservations(t *testing.T) {
	g := NewWithT(t)
	r := &provider[*captfv1.TerraformMachinePool]{engine: &engine{clock: clock.RealClock{}}, kind: machinePoolKind{}}
	mp := &captfv1.TerraformMachinePool{}
	mp.Spec.MembershipRefreshIntervalSeconds = ptr.To[int32](90)
	active := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j"}}
	p := &pass[*captfv1.TerraformMachinePool]{
		scope: &reconcileScope[*captfv1.TerraformMachinePool]{Object: mp},
		spec:  &mp.Spec.WorkspaceSpec, status: &mp.Status.WorkspaceStatus, init: &mp.Status.Initialization,
		active: &active, inputsWait: captfv1.CredentialsNotFoundReason, slots: decide.Slots{Busy: true},
		plan: &decide.Plan{Name: "p"},
	}
	in := r.input(p)
	g.Expect(in.ActiveJob).To(BeTrue())
	g.Expect(in.CredentialsMissing).To(BeTrue())
	g.Expect(in.Slots).To(Equal(decide.Slots{Busy: true}))
	g.Expect(in.MembershipInterval).To(Equal(90 * time.Second))
	g.Expect(in.Plan).To(Equal(&decide.Plan{Name: "p"}))
	g.Expect(decide.Next(in).Reason).To(Equal(decide.ReasonJobRunning))
}

// TestLeaseLostInActIsAnObservation: a lease taken between checkStart's read and act's take
// does not start the Job; it is recorded and decide.Next says what the object waits for.
func TestLeaseLostInActIsAnObservation(t *testing.T) {
	due := decide.Input{Now: time.Now(), Mutable: true, InputsHash: "h2:b",
		State: decide.State{Present: true, InputsHash: "h2:a", Resources: 1}, EverApplied: true, DurableInputs: true,
		Start: decide.Start{Checked: true}}
	for _, tc := range []struct {
		name string
		gate bool
		wait leases.Wait
	}{
		{"the run lease", false, leases.Wait{Reason: captfv1.WaitingForRunLeaseReason, Message: "Lease l changed while it was being taken"}},
		{"the cluster's lease, under the gate", true, leases.Wait{Reason: captfv1.WaitingForClusterOperationReason, Message: "Waiting for c1-apply"}},
		{"a wait Next has no rule for still waits", false, leases.Wait{Reason: captfv1.WaitingForClusterOperationReason}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := &provider[*captfv1.TerraformMachine]{engine: &engine{}, kind: machineKind{}}
			p := &pass[*captfv1.TerraformMachine]{input: due}
			p.input.Start.Leases.Gate = tc.gate
			p.decision = decide.Next(p.input)
			g.Expect(p.decision.Starts()).To(BeTrue())
			w := tc.wait
			r.leaseLost(context.Background(), p, &w)
			g.Expect(p.decision.Starts()).To(BeFalse())
			g.Expect(p.decision.Reason).To(Equal(tc.wait.Reason))
			g.Expect(p.decision.Pending).To(Equal(captfv1.OperationApply))
			g.Expect(p.leaseWait).To(Equal(&w))
		})
	}
}

// TestUnappliedImage (issue 25 item 1): a destroy never runs a module version that did not apply
// the state without saying so.
func TestUnappliedImage(t *testing.T) {
	applied := &state.Snapshot{Image: "m:v1"}
	for _, tc := range []struct {
		name  string
		op    captfv1.Operation
		snap  *state.Snapshot
		image string
		warns bool
	}{
		{"a destroy with the image that applied", captfv1.OperationDestroy, applied, "m:v1", false},
		{"a destroy with a version that never applied", captfv1.OperationDestroy, applied, "m:v2", true},
		{"an apply of a new version is the rollout", captfv1.OperationApply, applied, "m:v2", false},
		{"a state from before images were recorded", captfv1.OperationDestroy, &state.Snapshot{}, "m:v2", false},
		{"no state", captfv1.OperationDestroy, nil, "m:v2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := unappliedImage(tc.op, tc.snap, tc.image, "j1")
			if (msg != "") != tc.warns {
				t.Fatalf("message %q, want a warning: %v", msg, tc.warns)
			}
			if tc.warns && (!strings.Contains(msg, "m:v2") || !strings.Contains(msg, "m:v1") || !strings.Contains(msg, "j1")) {
				t.Errorf("the warning does not name the Job, the image it runs and the one that applied: %q", msg)
			}
		})
	}
}
