// Package csitest backs simulated disks with real block devices: every disk the simulator
// creates is a sparse file, every attach a loop device linked by the disk's serial in the
// by-id directory of the VM it is attached to, so the node plugin finds it exactly as it finds
// a disk on a real node. Snapshots, clones and rollbacks copy the files. It needs root
// (losetup) and is for tests only.
package csitest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/capx-io/capx/internal/capvco/csi/device"
)

// Loops implements vcosim.DiskDevices on loop devices under Root.
type Loops struct {
	Root string

	mu       sync.Mutex
	attached map[int]attachment // disk id -> its loop device
}

type attachment struct {
	vm   int
	loop string
}

// NewLoops starts a harness in a directory of the test's; it detaches every loop device
// it made when the test ends.
func NewLoops(t testing.TB) *Loops {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("csitest: loop devices need root; run this test as root (CI does)")
	}
	for _, tool := range []string{"losetup", "cp", "truncate"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("csitest: %s is missing: run hack/install-deps.sh", tool)
		}
	}
	l := &Loops{Root: t.TempDir(), attached: map[int]attachment{}}
	t.Cleanup(l.close)
	return l
}

// ByIDDir is the by-id directory of a VM: what its node plugin's device.Finder reads.
func (l *Loops) ByIDDir(vmID int) string {
	return filepath.Join(l.Root, "vm-"+strconv.Itoa(vmID), "by-id")
}

// Loop is the loop device a disk is attached as, if any.
func (l *Loops) Loop(diskID int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.attached[diskID].loop
}

// DiskFile is the file holding a disk's content.
func (l *Loops) DiskFile(diskID int) string {
	return filepath.Join(l.Root, "disks", strconv.Itoa(diskID)+".img")
}

func (l *Loops) snapFile(diskID int, snap string) string {
	return filepath.Join(l.Root, "snapshots", strconv.Itoa(diskID)+"-"+snap+".img")
}

func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

func copyFile(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return err
	}
	_, err := run("cp", "--sparse=always", from, to)
	return err
}

// Created implements vcosim.DiskDevices.
func (l *Loops) Created(diskID, sizeGiB int) error {
	if err := os.MkdirAll(filepath.Dir(l.DiskFile(diskID)), 0o700); err != nil {
		return err
	}
	_, err := run("truncate", "-s", strconv.Itoa(sizeGiB)+"G", l.DiskFile(diskID))
	return err
}

// Attached implements vcosim.DiskDevices.
func (l *Loops) Attached(diskID, vmID int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := os.Stat(l.DiskFile(diskID)); err != nil {
		return fmt.Errorf("disk %d has no content file: %w", diskID, err)
	}
	loop, err := run("losetup", "--find", "--show", l.DiskFile(diskID))
	if err != nil {
		return err
	}
	dir := l.ByIDDir(vmID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Symlink(loop, filepath.Join(dir, device.Names(diskID)[0])); err != nil {
		_, _ = run("losetup", "-d", loop)
		return err
	}
	l.attached[diskID] = attachment{vm: vmID, loop: loop}
	return nil
}

// Detached implements vcosim.DiskDevices.
func (l *Loops) Detached(diskID, vmID int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.attached[diskID]
	if !ok {
		return nil
	}
	if err := os.Remove(filepath.Join(l.ByIDDir(a.vm), device.Names(diskID)[0])); err != nil && !os.IsNotExist(err) {
		return err
	}
	if _, err := run("losetup", "-d", a.loop); err != nil {
		return err
	}
	delete(l.attached, diskID)
	return nil
}

// Resized implements vcosim.DiskDevices.
func (l *Loops) Resized(diskID, sizeGiB int) error {
	if _, err := run("truncate", "-s", strconv.Itoa(sizeGiB)+"G", l.DiskFile(diskID)); err != nil {
		return err
	}
	return l.refresh(diskID)
}

// refresh makes an attached disk's loop device see its file's new size.
func (l *Loops) refresh(diskID int) error {
	if loop := l.Loop(diskID); loop != "" {
		_, err := run("losetup", "-c", loop)
		return err
	}
	return nil
}

// Snapshotted implements vcosim.DiskDevices.
func (l *Loops) Snapshotted(diskID int, snap string) error {
	if loop := l.Loop(diskID); loop != "" {
		_, _ = run("sync")
	}
	return copyFile(l.DiskFile(diskID), l.snapFile(diskID, snap))
}

// Cloned implements vcosim.DiskDevices.
func (l *Loops) Cloned(diskID int, snap string, newDiskID int) error {
	return copyFile(l.snapFile(diskID, snap), l.DiskFile(newDiskID))
}

// RolledBack implements vcosim.DiskDevices.
func (l *Loops) RolledBack(diskID int, snap string) error {
	if err := copyFile(l.snapFile(diskID, snap), l.DiskFile(diskID)); err != nil {
		return err
	}
	return l.refresh(diskID)
}

// SnapshotDeleted implements vcosim.DiskDevices.
func (l *Loops) SnapshotDeleted(diskID int, snap string) error {
	return os.Remove(l.snapFile(diskID, snap))
}

// Deleted implements vcosim.DiskDevices.
func (l *Loops) Deleted(diskID int) error {
	err := os.Remove(l.DiskFile(diskID))
	if os.IsNotExist(err) {
		return nil
	}
	return err
}

func (l *Loops) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, a := range l.attached {
		_, _ = run("losetup", "-d", a.loop)
		delete(l.attached, id)
	}
}
