package gpucheck

import (
	"fmt"
	"time"

	"github.com/capx-io/capx/internal/capvco/gpuname"
)

// Classify sorts one reservation. owners is nil when no management cluster was asked; now
// dates the recycle bin. It is pure: every ownership rule of the tool is here.
func Classify(r Reservation, owners *Owners, now time.Time) Finding {
	f := Finding{Reservation: r}
	n, err := gpuname.Parse(r.Name)
	parsed := err == nil
	if parsed {
		f.Owner, f.OwnerVerified = ownerOf(n), owners != nil
	}
	switch {
	case !gpuname.LooksOurs(r.Name):
		f.Class, f.Reason = Foreign, "not a CAPVCO name"
	case parsed && owners == nil:
		f.Class, f.Reason = classifyUnverified(r)
	case parsed:
		f.Class, f.Reason = classifyParsed(r, f.Owner, owners)
	default:
		f.Class, f.Reason = classifyRenamed(r, owners)
	}
	if f.Class == RecycleBin {
		billed := Duration(now.Sub(*r.DeletedAt))
		f.BilledInRecycleBin = &billed
	}
	// An orphan is unattached (as the seed's check has it), except one attached to a VM that
	// is not its machine's: that is billed for somebody else's use and nobody will release it.
	f.Orphan = f.Class == AttachedForeign || (!r.Attached() && f.Class != Owned && f.Class != Foreign)
	f.Releasable, f.ReleaseNeeds = releasable(f)
	return f
}

// releasable decides what `release` may select: an unattached orphan whose name parses
// exactly and whose owner the management cluster confirmed gone, with no opt-in; one whose
// name only starts with "capvco" (gpuname.LooksOurs is a loose, case-insensitive prefix:
// "capvco-keep-do-not-delete", another team's "CapVcoTraining…", a "…_gpu_0-keep" kept on
// purpose) or whose owner nobody checked only with the opt-in it names.
func releasable(f Finding) (bool, string) {
	switch {
	case !f.Orphan || f.Attached():
		return false, ""
	case f.Owner == nil:
		return false, OptInRenamed
	case !f.OwnerVerified:
		return false, OptInUnverified
	}
	return true, ""
}

func classifyUnverified(r Reservation) (Class, string) {
	switch {
	case r.DeletedAt != nil:
		return RecycleBin, "deleted without permanently=true: in the recycle bin and still billed"
	case r.Attached():
		return Unverified, fmt.Sprintf("attached to VM %s; no management cluster was asked who owns it", vmName(r.VM))
	}
	return Unverified, "unattached; no management cluster was asked who owns it"
}

func classifyParsed(r Reservation, ow *Owner, owners *Owners) (Class, string) {
	m := owners.machine(ow)
	if m != nil {
		if r.Attached() && m.VMID != nil && int64(r.VM.ID) != *m.VMID {
			return AttachedForeign, fmt.Sprintf("attached to VM %s, but VCOMachine %s/%s runs VM %d", vmName(r.VM), m.Namespace, m.Name, *m.VMID)
		}
		switch {
		case m.Deleting && r.DeletedAt != nil:
			return Owned, fmt.Sprintf("VCOMachine %s/%s (being deleted: its teardown releases this reservation, recycle bin included); soft-deleted, still billed", m.Namespace, m.Name)
		case m.Deleting:
			return Owned, fmt.Sprintf("VCOMachine %s/%s (being deleted: its teardown releases this reservation)", m.Namespace, m.Name)
		case r.DeletedAt != nil:
			// A live machine does not use a reservation in the recycle bin: it is unattached
			// and billed, and until the machine restores it (it does when it next needs its
			// vGPU) nothing releases it.
			return RecycleBin, fmt.Sprintf("VCOMachine %s/%s exists but does not use it: in the recycle bin, unattached and still billed", m.Namespace, m.Name)
		}
		return Owned, fmt.Sprintf("VCOMachine %s/%s", m.Namespace, m.Name)
	}
	gone := fmt.Sprintf("VCOMachine %s/%s no longer exists", ow.Namespace, ow.Machine)
	if !owners.cluster(ow) {
		gone = fmt.Sprintf("cluster %s/%s no longer exists", ow.Namespace, ow.Cluster)
	}
	switch {
	case r.Attached():
		return AttachedForeign, fmt.Sprintf("attached to VM %s, but %s", vmName(r.VM), gone)
	case r.DeletedAt != nil:
		return RecycleBin, gone + "; in the recycle bin and still billed"
	}
	return Orphaned, gone
}

func classifyRenamed(r Reservation, owners *Owners) (Class, string) {
	const why = "renamed: not capvco_<ns>_<cluster>_<machine>_gpu_<n>, so no teardown releases it"
	switch {
	case r.DeletedAt != nil:
		return RecycleBin, why + "; in the recycle bin and still billed"
	case r.Attached() && owners != nil:
		if m, ok := owners.runsVM(r.VM.ID); ok {
			return Renamed, fmt.Sprintf("attached to VM %s of VCOMachine %s/%s, but %s (an orphan once detached)", vmName(r.VM), m.Namespace, m.Name, why)
		}
		return AttachedForeign, fmt.Sprintf("attached to VM %s, which no VCOMachine runs; %s", vmName(r.VM), why)
	case r.Attached():
		return Renamed, fmt.Sprintf("attached to VM %s; %s (an orphan once detached)", vmName(r.VM), why)
	}
	return Renamed, why
}

func vmName(v *VM) string {
	if v.Name == "" {
		return fmt.Sprint(v.ID)
	}
	return fmt.Sprintf("%s (%d)", v.Name, v.ID)
}
