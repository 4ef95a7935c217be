package decide

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
)

func TestPlatformReadDue(t *testing.T) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	resync := 10 * time.Minute
	recorded := func(mut func(*capvcov1.VCOCluster)) *capvcov1.VCOCluster {
		vc := &capvcov1.VCOCluster{Spec: capvcov1.VCOClusterSpec{Location: "l1"}}
		vc.Generation = 3
		vc.Status = capvcov1.VCOClusterStatus{
			ObservedGeneration: 3,
			PlatformCheckedAt:  &metav1.Time{Time: now.Add(-4 * time.Minute)},
			Cloudspaces:        []capvcov1.CloudspaceStatus{{Site: "primary", Location: "l1", ID: "cs", Name: "n", ExternalIP: "203.0.113.5"}},
			LoadBalancer:       &capvcov1.LoadBalancerStatus{ID: "lb", ServerPoolID: "p", Address: "203.0.113.5", Members: []string{"10.0.0.2"}},
			Conditions: []metav1.Condition{
				{Type: capvcov1.CloudspaceReadyCondition, Status: metav1.ConditionTrue, ObservedGeneration: 3},
				{Type: capvcov1.LoadBalancerReadyCondition, Status: metav1.ConditionTrue, ObservedGeneration: 3},
			},
		}
		if mut != nil {
			mut(vc)
		}
		return vc
	}
	for _, tc := range []struct {
		name string
		vc   *capvcov1.VCOCluster
		due  bool
		next time.Duration
	}{
		{name: "recorded, ready and fresh", vc: recorded(nil), next: 6 * time.Minute},
		{name: "never read", vc: recorded(func(vc *capvcov1.VCOCluster) { vc.Status.PlatformCheckedAt = nil }), due: true},
		{name: "resync old", vc: recorded(func(vc *capvcov1.VCOCluster) { vc.Status.PlatformCheckedAt.Time = now.Add(-resync) }), due: true},
		{name: "stamped by a clock ahead", vc: recorded(func(vc *capvcov1.VCOCluster) { vc.Status.PlatformCheckedAt.Time = now.Add(time.Minute) }), due: true},
		{name: "spec changed", vc: recorded(func(vc *capvcov1.VCOCluster) { vc.Generation = 4 }), due: true},
		{name: "status wiped (a move)", vc: recorded(func(vc *capvcov1.VCOCluster) {
			vc.Status = capvcov1.VCOClusterStatus{ObservedGeneration: 3, PlatformCheckedAt: &metav1.Time{Time: now}}
		}), due: true},
		{name: "no pool recorded", vc: recorded(func(vc *capvcov1.VCOCluster) { vc.Status.LoadBalancer.ServerPoolID = "" }), due: true},
		{name: "no external address", vc: recorded(func(vc *capvcov1.VCOCluster) { vc.Status.Cloudspaces[0].ExternalIP = "" }), due: true},
		{name: "load balancer on another address", vc: recorded(func(vc *capvcov1.VCOCluster) { vc.Status.LoadBalancer.Address = "203.0.113.9" }), due: true},
		{name: "a geo site not recorded", vc: recorded(func(vc *capvcov1.VCOCluster) {
			vc.Spec.Geo = &capvcov1.GeoSpec{Sites: []capvcov1.GeoSite{{Name: "b", Location: "l2"}}}
		}), due: true},
		{name: "load balancer not ready", vc: recorded(func(vc *capvcov1.VCOCluster) { vc.Status.Conditions[1].Status = metav1.ConditionFalse }), due: true},
		{name: "cloudspace condition of an older generation", vc: recorded(func(vc *capvcov1.VCOCluster) { vc.Status.Conditions[0].ObservedGeneration = 2 }), due: true},
		{name: "no cloudspace condition", vc: recorded(func(vc *capvcov1.VCOCluster) { vc.Status.Conditions = vc.Status.Conditions[1:] }), due: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			due, next := PlatformReadDue(tc.vc, resync, now)
			if due != tc.due || next != tc.next {
				t.Fatalf("PlatformReadDue = %v, %s; want %v, %s", due, next, tc.due, tc.next)
			}
		})
	}
}

func TestSameMembers(t *testing.T) {
	for _, tc := range []struct {
		healthy, members []string
		same             bool
	}{
		{nil, nil, true},
		{[]string{}, nil, true},
		{[]string{"b", "a"}, []string{"a", "b"}, true},
		{[]string{"a", "a"}, []string{"a"}, true},
		{[]string{"a"}, []string{"a", "b"}, false},
		{[]string{"a", "c"}, []string{"a", "b"}, false},
		{[]string{"a"}, nil, false},
	} {
		if got := SameMembers(tc.healthy, tc.members); got != tc.same {
			t.Errorf("SameMembers(%v, %v) = %v, want %v", tc.healthy, tc.members, got, tc.same)
		}
	}
}

func TestVMReadDue(t *testing.T) {
	resync := 10 * time.Minute
	window := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC) // a multiple of resync from the zero time
	running := func(at time.Time) *capvcov1.VMStatus {
		return &capvcov1.VMStatus{Name: "vm", State: "RUNNING", CheckedAt: metav1.Time{Time: at}}
	}
	for _, tc := range []struct {
		name       string
		rec        *capvcov1.VMStatus
		recordedID int
		now        time.Time
		due        bool
		next       time.Duration
	}{
		{name: "nothing recorded", recordedID: 7, now: window, due: true},
		{name: "another VM recorded", rec: running(window), recordedID: 8, now: window.Add(time.Minute), due: true},
		{name: "not running", rec: &capvcov1.VMStatus{State: "HALTED", CheckedAt: metav1.Time{Time: window}}, recordedID: 7, now: window.Add(time.Second), due: true},
		{name: "read at the window's start: due at its end", rec: running(window), recordedID: 7, now: window.Add(time.Minute), next: 9 * time.Minute},
		{name: "read late in the window: due with the others", rec: running(window.Add(9 * time.Minute)), recordedID: 7, now: window.Add(9*time.Minute + 30*time.Second), next: 30 * time.Second},
		{name: "the window ended", rec: running(window.Add(9 * time.Minute)), recordedID: 7, now: window.Add(resync), due: true},
		{name: "recorded by a clock ahead", rec: running(window.Add(time.Minute)), recordedID: 7, now: window, due: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			due, next := VMReadDue(tc.rec, tc.recordedID, 7, resync, tc.now)
			if due != tc.due || next != tc.next {
				t.Fatalf("VMReadDue = %v, %s; want %v, %s", due, next, tc.due, tc.next)
			}
		})
	}
}
