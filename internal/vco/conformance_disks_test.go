package vco_test

import (
	"errors"
	"testing"

	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// diskScenario exercises the disk calls the CSI driver makes beyond create/attach/delete:
// resize, the recycle bin, snapshots, clones, rollback, capacity and the attach limit.
func diskScenario(t *testing.T, e *env, cloudspaceID string, vmID int) {
	t.Helper()
	ctx, c := e.ctx, e.cluster
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	disk, err := c.CreateDisk(ctx, loc, vco.CreateDiskRequest{Name: "pv-2", SizeGiB: 4})
	check(err)
	check(c.ResizeDisk(ctx, loc, disk, 6))
	if err := c.ResizeDisk(ctx, loc, disk, 5); !errors.Is(err, vco.ErrBadRequest) {
		t.Fatalf("a disk shrank: %v", err)
	}
	snap, err := c.TakeDiskSnapshot(ctx, loc, disk, "snap-1")
	check(err)
	snaps, err := c.ListDiskSnapshots(ctx, loc, disk, false)
	check(err)
	if len(snaps) != 1 || snaps[0].ID != snap || snaps[0].Name != "snap-1" {
		t.Fatalf("snapshots = %+v", snaps)
	}
	got, err := c.GetDiskSnapshot(ctx, loc, disk, snap)
	check(err)
	if got.ID != snap || len(got.Disks) != 1 {
		t.Fatalf("snapshot = %+v", got)
	}
	check(c.ResizeDisk(ctx, loc, disk, 8))
	check(c.RollbackDiskSnapshot(ctx, loc, disk, snap))
	if d, err := c.GetDisk(ctx, loc, disk); err != nil || d.SizeGiB != 6 {
		t.Fatalf("after rollback: %+v %v", d, err)
	}
	clone, err := c.CloneDiskSnapshot(ctx, loc, disk, snap, "pv-2-clone", "")
	check(err)
	if d, err := c.GetDisk(ctx, loc, clone); err != nil || d.SizeGiB != 6 {
		t.Fatalf("clone: %+v %v", d, err)
	}
	check(c.DeleteDiskSnapshot(ctx, loc, disk, snap))
	check(c.DeleteDisk(ctx, loc, clone, false))
	check(c.RestoreDisk(ctx, loc, clone, "conformance"))
	check(c.DeleteDisk(ctx, loc, clone, true))
	check(c.DeleteDisk(ctx, loc, disk, true))
	capa, err := c.GetLocationCapacity(ctx, loc)
	check(err)
	if capa.SU <= 0 {
		t.Fatalf("capacity = %+v", capa)
	}

	// The attach limit: a VM takes vcosim.DefaultMaxVMDisks disks, its boot disk included.
	vmDisks, err := c.ListVMDisks(ctx, cloudspaceID, vmID)
	check(err)
	var extra []int
	for range vcosim.DefaultMaxVMDisks - len(vmDisks) {
		id, err := c.CreateDisk(ctx, loc, vco.CreateDiskRequest{Name: "fill", SizeGiB: 1, VMID: vmID})
		check(err)
		extra = append(extra, id)
	}
	over, err := c.CreateDisk(ctx, loc, vco.CreateDiskRequest{Name: "over", SizeGiB: 1})
	check(err)
	if err := c.AttachDisk(ctx, cloudspaceID, vmID, over); !errors.Is(err, vco.ErrBadRequest) {
		t.Fatalf("attach past the limit: %v", err)
	}
	for _, id := range append(extra, over) {
		check(c.DeleteDisk(ctx, loc, id, true))
	}
}
