package decide

import (
	"testing"
	"time"
)

func TestWaitsToLeavePool(t *testing.T) {
	since := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	members := []string{"10.0.0.1", "10.0.0.2"}
	for _, tc := range []struct {
		name         string
		controlPlane bool
		ip           string
		after        time.Duration
		want         bool
	}{
		{"a control plane still a member waits", true, "10.0.0.2", time.Second, true},
		{"one the cluster took out goes on", true, "10.0.0.3", time.Second, false},
		{"a worker never waits", false, "10.0.0.2", time.Second, false},
		{"no address: nothing to wait for", true, "", time.Second, false},
		{"after LeavePoolWait it goes on", true, "10.0.0.2", LeavePoolWait, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := WaitsToLeavePool(tc.controlPlane, tc.ip, members, since, since.Add(tc.after)); got != tc.want {
				t.Errorf("WaitsToLeavePool = %v, want %v", got, tc.want)
			}
		})
	}
}
