package vcosim

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// TestRecycledImageCanBePurged: an image soft-deleted into the recycle bin is removed by a
// permanent delete, as on the platform, instead of answering 404 and staying there.
func TestRecycledImageCanBePurged(t *testing.T) {
	s := NewTestServer(t, Options{})
	admin := token(t, s, SeedOperatorPrinc)
	base := "/api/1/customers/acme/locations/" + SeedLocation + "/vm-images"
	q := url.Values{"name": {"custom"}, "url": {"https://images.example/custom.qcow2"}, "memory": {"512"}, "boot_disk_size": {"10"}, "os_type": {"Linux"}, "os_name": {"Ubuntu"}, "boot_type": {"bios"}}
	code, body := do(t, s, "POST", base+"?"+q.Encode(), admin, "")
	if code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	var created struct {
		ID int `json:"image_id"`
	}
	if err := json.Unmarshal([]byte(body), &created); err != nil || created.ID == 0 {
		t.Fatalf("create answered %s", body)
	}
	path := base + "/" + itoaTest(created.ID)
	if code, body := do(t, s, "DELETE", path, admin, ""); code != 200 {
		t.Fatalf("soft delete: %d %s", code, body)
	}
	if code, body := do(t, s, "DELETE", path+"?permanently=true", admin, ""); code != 200 {
		t.Fatalf("purge from the recycle bin: %d %s", code, body)
	}
	for _, img := range s.Snapshot().Images {
		if img.ID == created.ID {
			t.Fatalf("image %d is still there (%s)", img.ID, img.Status)
		}
	}
	if code, _ := do(t, s, "DELETE", path+"?permanently=true", admin, ""); code != 404 {
		t.Fatalf("a purged image answers %d, want 404", code)
	}
}

// TestFaultsSpareIAMAndSim: a catch-all fault rule hits the customer API only, so the IAM
// and /sim/v1 stay usable and the operator can remove the rule again.
func TestFaultsSpareIAMAndSim(t *testing.T) {
	s := NewTestServer(t, Options{})
	admin := token(t, s, SeedOperatorPrinc)
	if code, body := do(t, s, "PUT", "/sim/v1/faults", admin, `{"rules":[{"route":"*","status":500}]}`); code != 200 {
		t.Fatalf("install: %d %s", code, body)
	}
	if code, _ := do(t, s, "GET", "/api/1/me", admin, ""); code != 500 {
		t.Fatalf("the customer API answers %d under a * rule, want 500", code)
	}
	if code, _ := do(t, s, "GET", "/sim/v1/state", admin, ""); code != 200 {
		t.Fatalf("/sim/v1/state answers %d under a * rule", code)
	}
	id, secret, err := s.ClientSecret(SeedClusterPrinc)
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {secret}}
	if code, body := do(t, s, "POST", "/iam/v1/oauth/access_token?"+form.Encode(), "", ""); code != 200 {
		t.Fatalf("the IAM answers %d under a * rule: %s", code, body)
	}
	if code, body := do(t, s, "DELETE", "/sim/v1/faults", admin, ""); code != 200 {
		t.Fatalf("remove: %d %s", code, body)
	}
	if code, _ := do(t, s, "GET", "/api/1/me", admin, ""); code != 200 {
		t.Fatalf("after removing the rule: %d", code)
	}
}

// TestFaultsFireAfterAuthentication: an untokened call is 401 even under a 500 rule.
func TestFaultsFireAfterAuthentication(t *testing.T) {
	s := NewTestServer(t, Options{})
	s.Faults().Add(Fault{Route: "GET /me", Status: 500})
	if code, _ := do(t, s, "GET", "/api/1/me", "", ""); code != 401 {
		t.Fatalf("untokened call under a 500 rule: %d, want 401", code)
	}
	if code, _ := do(t, s, "GET", "/api/1/me", token(t, s, SeedClusterPrinc), ""); code != 500 {
		t.Fatalf("tokened call under a 500 rule: %d, want 500", code)
	}
}

// TestUserdataObjectIsCloudConfig: a JSON body userdata object is stored as cloud-config YAML,
// not in Go map syntax.
func TestUserdataObjectIsCloudConfig(t *testing.T) {
	s := NewTestServer(t, Options{})
	tok := token(t, s, SeedClusterPrinc)
	code, body := do(t, s, "POST", "/api/1/customers/acme/cloudspaces", tok,
		`{"name":"u","location":"`+SeedLocation+`","firewall":{"private":false}}`)
	if code != 200 {
		t.Fatalf("cloudspace: %d %s", code, body)
	}
	var cs struct {
		ID string `json:"cloudspace_id"`
	}
	_ = json.Unmarshal([]byte(body), &cs)
	img := 0
	for _, i := range s.Snapshot().Images {
		if i.Location == SeedLocation && i.Name == SeedImageName {
			img = i.ID
		}
	}
	q := url.Values{"name": {"vm"}, "description": {"vm"}, "vcpus": {"1"}, "memory": {"1024"}, "image_id": {itoaTest(img)}}
	code, body = do(t, s, "POST", "/api/1/customers/acme/cloudspaces/"+cs.ID+"/vms?"+q.Encode(), tok,
		`{"userdata":{"hostname":"vm","runcmd":["echo hi"]}}`)
	if code != 200 {
		t.Fatalf("vm: %d %s", code, body)
	}
	got := s.Snapshot().VMs[0].UserData
	if want := "#cloud-config\nhostname: vm\nruncmd:\n- echo hi\n"; got != want {
		t.Fatalf("user data = %q, want %q", got, want)
	}
	if strings.Contains(got, "map[") {
		t.Fatal("Go map syntax")
	}
}

func itoaTest(i int) string { b, _ := json.Marshal(i); return string(b) }
