package gpucheck_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/capx-io/capx/internal/gpucheck"
)

// TestClassifyRecycleBinOfALiveMachine: a reservation of a live machine in the recycle bin is
// unattached and billed, and the machine does not use it: a releasable orphan, not "owned".
// A machine being deleted keeps its own (its teardown releases the recycle bin too).
func TestClassifyRecycleBinOfALiveMachine(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	deleted := now.Add(-3 * time.Hour)
	owners := gpucheck.NewOwners([]gpucheck.Machine{
		{Namespace: "ns", Name: "m1", Cluster: "c1"},
		{Namespace: "ns", Name: "m2", Cluster: "c1", Deleting: true},
	}, []types.NamespacedName{{Namespace: "ns", Name: "c1"}})
	live := gpucheck.Classify(gpucheck.Reservation{ID: "v1", Name: "capvco_ns_c1_m1_gpu_0", DeletedAt: &deleted}, owners, now)
	if live.Class != gpucheck.RecycleBin || !live.Orphan || !live.Releasable || live.BilledInRecycleBin == nil {
		t.Fatalf("live machine's recycle bin: %+v", live)
	}
	going := gpucheck.Classify(gpucheck.Reservation{ID: "v2", Name: "capvco_ns_c1_m2_gpu_0", DeletedAt: &deleted}, owners, now)
	if going.Class != gpucheck.Owned || going.Orphan {
		t.Fatalf("deleting machine's recycle bin: %+v", going)
	}
}
