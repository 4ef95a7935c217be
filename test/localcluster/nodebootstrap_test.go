package localcluster

import (
	"strings"
	"testing"
)

func testSecrets(t testing.TB) ClusterSecrets {
	t.Helper()
	s, err := NewClusterSecrets("wl")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestUserDataRoundTrip: the user data a bootstrap Secret would hold parses back to the same
// document for both roles, and the worker's carries no key.
func TestUserDataRoundTrip(t *testing.T) {
	s := testSecrets(t)
	for _, role := range []string{RoleControlPlane, RoleWorker} {
		nb := s.Bootstrap(role, "wl", "203.0.113.10:6443", "10.96.0.0/16", "10.244.0.0/16")
		ud, err := nb.UserData()
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		got, err := ParseUserData(string(ud))
		if err != nil {
			t.Fatalf("%s: %v\n%s", role, err, ud)
		}
		if got != nb {
			t.Errorf("%s: parsed %+v, want %+v", role, got, nb)
		}
		if role == RoleWorker && strings.Contains(string(ud), "PRIVATE KEY") {
			t.Errorf("the worker's user data carries a private key")
		}
	}
}

// TestParseUserDataRefuses: what is not a prepared node's bootstrap data, or is a wrong one,
// is refused with a message naming what is wrong.
func TestParseUserDataRefuses(t *testing.T) {
	s := testSecrets(t)
	worker := s.Bootstrap(RoleWorker, "wl", "203.0.113.10:6443", "10.96.0.0/16", "10.244.0.0/16")
	withKey := worker
	withKey.CAKey = s.CAKey
	badToken := worker
	badToken.Token = "abc.def"
	overlap := worker
	overlap.PodCIDR = "10.96.0.0/12"
	render := func(nb NodeBootstrap) string {
		b, err := nb.cloudConfig()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for name, tc := range map[string]struct{ userData, want string }{
		"kubeadm":         {"## template: jinja\n#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm.yaml\n  content: x\nruncmd:\n- kubeadm init\n", "not a cloud-config"},
		"no document":     {"#cloud-config\nruncmd:\n- kubeadm join\n", "no " + NodeBootstrapPath},
		"not yaml":        {"#cloud-config\n: : :\n", "user data"},
		"unknown field":   {"#cloud-config\nwrite_files:\n- path: " + NodeBootstrapPath + "\n  content: 'role: worker\n\n    extra: 1'\n", "extra"},
		"worker with key": {render(withKey), "carries no caKey"},
		"bad token":       {render(badToken), "token"},
		"overlap":         {render(overlap), "overlap"},
		"too big":         {"#cloud-config\n" + strings.Repeat("#", maxUserData), "more than"},
	} {
		_, err := ParseUserData(tc.userData)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error about %q", name, err, tc.want)
		}
	}
}

// FuzzParseUserData: any user data is refused or yields a document that validates and renders
// again.
func FuzzParseUserData(f *testing.F) {
	s := testSecrets(f)
	for _, role := range []string{RoleControlPlane, RoleWorker} {
		ud, err := s.Bootstrap(role, "wl", "203.0.113.10:6443", "10.96.0.0/16", "10.244.0.0/16").UserData()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(ud))
	}
	f.Add("#cloud-config\nwrite_files: [{path: " + NodeBootstrapPath + ", content: '{}'}]\n")
	f.Fuzz(func(t *testing.T, userData string) {
		nb, err := ParseUserData(userData)
		if err != nil {
			return
		}
		if err := nb.Validate(); err != nil {
			t.Fatalf("parsed a document that does not validate: %v", err)
		}
		if _, err := nb.UserData(); err != nil {
			t.Fatalf("a parsed document does not render: %v", err)
		}
	})
}
