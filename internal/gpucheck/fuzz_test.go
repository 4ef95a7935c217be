package gpucheck_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/capx-io/capx/internal/gpucheck"
)

// FuzzClassify holds the safety rules for any name the platform may return: nothing attached
// is releasable, nothing owned or foreign is an orphan, and an owner is set exactly when the
// name parses.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"capvco_ns_c1_m1_gpu_0", "capvco_ns_c1_m9_gpu_0", "CAPVCO_x", "capvco", "", "capvco_ns_c1_m1_gpu_01", "ml-gpu", "capvco_ns_c1_m1_gpu_0\x00",
		"capvco-keep-do-not-delete", "CapVcoTrainingReservedByTeamB", "capvco_ns_c1_m9_gpu_0-keep"} {
		f.Add(s, false, false, 0)
		f.Add(s, true, false, 105)
		f.Add(s, false, true, 7)
	}
	vm := int64(105)
	owners := gpucheck.NewOwners([]gpucheck.Machine{{Namespace: "ns", Name: "m1", Cluster: "c1", VMID: &vm}}, []types.NamespacedName{{Namespace: "ns", Name: "c1"}})
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, name string, attached, deleted bool, vmID int) {
		r := gpucheck.Reservation{ID: "v", Name: name, Location: "l"}
		if attached && vmID != 0 {
			r.VM = &gpucheck.VM{ID: vmID, Name: "vm"}
		}
		if deleted {
			d := now.Add(-time.Hour)
			r.DeletedAt = &d
		}
		for _, o := range []*gpucheck.Owners{owners, nil} {
			fd := gpucheck.Classify(r, o, now)
			if (fd.Releasable || fd.ReleaseNeeds != "") && (r.Attached() || !fd.Orphan) {
				t.Fatalf("%q: releasable while attached or not an orphan: %+v", name, fd)
			}
			if fd.Releasable && (fd.Owner == nil || !fd.OwnerVerified || fd.ReleaseNeeds != "") {
				t.Fatalf("%q: selected with no opt-in though not an exact, verified name: %+v", name, fd)
			}
			if fd.Orphan && !r.Attached() && !fd.Releasable && fd.ReleaseNeeds == "" {
				t.Fatalf("%q: an unattached orphan that no opt-in can release: %+v", name, fd)
			}
			if fd.Orphan && (fd.Class == gpucheck.Owned || fd.Class == gpucheck.Foreign) {
				t.Fatalf("%q: %s counted as an orphan", name, fd.Class)
			}
			if fd.Class == "" || fd.Reason == "" {
				t.Fatalf("%q: no class or reason: %+v", name, fd)
			}
			if o == nil && (fd.Class == gpucheck.Owned || fd.Class == gpucheck.Orphaned || fd.OwnerVerified) {
				t.Fatalf("%q: ownership concluded without a management cluster: %+v", name, fd)
			}
		}
	})
}
