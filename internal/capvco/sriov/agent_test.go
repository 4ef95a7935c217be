package sriov

import (
	"testing"

	"github.com/capx-io/capx/internal/vco"
)

// TestNewNIC: the attached NIC is the one on the network whose MAC was not listed before the
// attach; none or several are errors, never a guess.
func TestNewNIC(t *testing.T) {
	old := vco.ExternalNIC{MAC: "52:54:01:00:00:01", IP: "203.0.113.10", NetworkID: 1}
	fresh := vco.ExternalNIC{MAC: "52:54:01:00:00:02", IP: "203.0.113.11", NetworkID: 1}
	other := vco.ExternalNIC{MAC: "52:54:01:00:00:03", IP: "100.64.10.10", NetworkID: 2}
	if n, err := newNIC([]vco.ExternalNIC{old}, []vco.ExternalNIC{old, fresh, other}, 1); err != nil || n.MAC != fresh.MAC {
		t.Errorf("newNIC = %+v, %v; want %s", n, err, fresh.MAC)
	}
	upper := old
	upper.MAC = "52:54:01:00:00:01"
	if _, err := newNIC([]vco.ExternalNIC{{MAC: "52-54-01-00-00-01", NetworkID: 1}}, []vco.ExternalNIC{upper}, 1); err == nil {
		t.Error("a MAC spelled differently counted as new")
	}
	if _, err := newNIC([]vco.ExternalNIC{old}, []vco.ExternalNIC{old}, 1); err == nil {
		t.Error("no new NIC, no error")
	}
	twin := fresh
	twin.MAC = "52:54:01:00:00:04"
	if _, err := newNIC(nil, []vco.ExternalNIC{fresh, twin}, 1); err == nil {
		t.Error("two new NICs, one picked")
	}
	bad := fresh
	bad.MAC = "not-a-mac"
	if _, err := newNIC(nil, []vco.ExternalNIC{bad}, 1); err == nil {
		t.Error("an unparsable MAC accepted")
	}
}

func TestStore(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	k := AttachmentKey{ContainerID: "c1", IfName: "net1"}
	if a, err := s.Get(k); a != nil || err != nil {
		t.Fatalf("empty store: %v %v", a, err)
	}
	want := Attachment{AttachmentKey: k, MAC: "52:54:01:00:00:02", IP: "203.0.113.11", NetworkID: 1}
	if err := s.Put(want); err != nil {
		t.Fatal(err)
	}
	if a, err := s.Get(k); err != nil || *a != want {
		t.Fatalf("Get = %+v %v", a, err)
	}
	if a, _ := s.Get(AttachmentKey{ContainerID: "c1", IfName: "net2"}); a != nil {
		t.Fatal("another interface's attachment returned")
	}
	if err := s.Delete(k); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(k); err != nil {
		t.Fatalf("a second delete: %v", err)
	}
}
