package vcosim

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a DiskDevices that logs every call and can fail one kind.
type recorder struct {
	log  []string
	fail string
}

func (r *recorder) rec(kind string, args ...any) error {
	r.log = append(r.log, kind+fmt.Sprintf("%v", args))
	if kind == r.fail {
		return fmt.Errorf("%s failed", kind)
	}
	return nil
}
func (r *recorder) Created(d, size int) error         { return r.rec("created", d, size) }
func (r *recorder) Attached(d, vm int) error          { return r.rec("attached", d, vm) }
func (r *recorder) Detached(d, vm int) error          { return r.rec("detached", d, vm) }
func (r *recorder) Resized(d, size int) error         { return r.rec("resized", d, size) }
func (r *recorder) Snapshotted(d int, s string) error { return r.rec("snapshotted", d, s) }
func (r *recorder) Cloned(d int, s string, n int) error {
	return r.rec("cloned", d, s, n)
}
func (r *recorder) RolledBack(d int, s string) error      { return r.rec("rolledback", d, s) }
func (r *recorder) SnapshotDeleted(d int, s string) error { return r.rec("snapshotdeleted", d, s) }
func (r *recorder) Deleted(d int) error                   { return r.rec("deleted", d) }

// TestDiskGrants: disk create, resize and snapshots are location-scoped, so a cloudspace grant
// gets the platform's 403 on them while it can still attach a disk to its own VMs.
func TestDiskGrants(t *testing.T) {
	s := NewTestServer(t, Options{})
	admin := token(t, s, SeedClusterPrinc)
	code, body := do(t, s, "POST", "/api/1/customers/acme/cloudspaces", admin, createCS)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	cs := strings.Split(body, `"`)[3]
	if _, err := s.AddPrincipal(Principal{Name: "cs-only", Customer: SeedCustomer, Grants: []Grant{{ResourceType: "cloudspace", ResourceID: cs}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddPrincipal(Principal{Name: "loc-only", Customer: SeedCustomer, Grants: []Grant{{ResourceType: "location", ResourceID: SeedLocation}}}); err != nil {
		t.Fatal(err)
	}
	csTok, locTok := token(t, s, "cs-only"), token(t, s, "loc-only")
	const disks = "/api/1/customers/acme/locations/" + SeedLocation + "/disks"
	if code, body := do(t, s, "POST", disks+"?disk_name=a&description=a&disk_size=1", csTok, ""); code != 403 {
		t.Fatalf("cloudspace grant created a disk: %d %s", code, body)
	}
	code, body = do(t, s, "POST", disks+"?disk_name=a&description=a&disk_size=1", locTok, "")
	if code != 200 {
		t.Fatalf("location grant: %d %s", code, body)
	}
	id := strings.Trim(strings.TrimPrefix(strings.TrimSpace(body), `{"disk_id":`), "}")
	for _, tc := range []struct{ method, path string }{
		{"PUT", "/" + id + "/size?disk_size=2"},
		{"POST", "/" + id + "/snapshots?snapshot_name=s"},
		{"GET", "/" + id + "/snapshots"},
	} {
		if code, body := do(t, s, tc.method, disks+tc.path, csTok, ""); code != 403 {
			t.Errorf("cloudspace grant %s %s: %d %s", tc.method, tc.path, code, body)
		}
		if code, body := do(t, s, tc.method, disks+tc.path, locTok, ""); code != 200 {
			t.Errorf("location grant %s %s: %d %s", tc.method, tc.path, code, body)
		}
	}
	if code, body := do(t, s, "GET", "/api/1/customers/acme/locations/"+SeedLocation2+"/disks", locTok, ""); code != 403 {
		t.Errorf("a grant on one location listed another's disks: %d %s", code, body)
	}
}

// TestDiskDevices: the harness hears of every change to a disk's content before the call
// answers, and a harness failure fails the call and changes nothing.
func TestDiskDevices(t *testing.T) {
	s := NewTestServer(t, Options{})
	r := &recorder{}
	s.SetDiskDevices(r)
	tok := token(t, s, SeedClusterPrinc)
	const disks = "/api/1/customers/acme/locations/" + SeedLocation + "/disks"
	_, body := do(t, s, "POST", disks+"?disk_name=a&description=a&disk_size=1", tok, "")
	id := strings.Trim(strings.TrimPrefix(strings.TrimSpace(body), `{"disk_id":`), "}")
	do(t, s, "PUT", disks+"/"+id+"/size?disk_size=3", tok, "")
	_, snap := do(t, s, "POST", disks+"/"+id+"/snapshots?snapshot_name=s", tok, "")
	snap = strings.Trim(strings.TrimSpace(snap), `"`)
	r.fail = "cloned"
	if code, _ := do(t, s, "POST", disks+"/"+id+"/snapshots/"+snap+"/clone?name=c", tok, ""); code != 500 {
		t.Errorf("a failed clone answered %d", code)
	}
	r.fail = ""
	if n := len(s.Snapshot().Disks); n != 1 {
		t.Errorf("a failed clone left %d disks", n)
	}
	do(t, s, "POST", disks+"/"+id+"/snapshots/"+snap+"/rollback", tok, "")
	do(t, s, "DELETE", disks+"/"+id+"/snapshots/"+snap, tok, "")
	do(t, s, "DELETE", disks+"/"+id+"?permanently=true", tok, "")
	var clone string
	for _, l := range r.log {
		if strings.HasPrefix(l, "cloned") {
			clone = l
		}
	}
	want := []string{"created[" + id + " 1]", "resized[" + id + " 3]", "snapshotted[" + id + " " + snap + "]", clone,
		"rolledback[" + id + " " + snap + "]", "snapshotdeleted[" + id + " " + snap + "]", "deleted[" + id + "]"}
	if !strings.HasPrefix(clone, "cloned["+id+" "+snap+" ") || strings.Join(r.log, ",") != strings.Join(want, ",") {
		t.Errorf("calls = %v\nwant  %v", r.log, want)
	}
}
