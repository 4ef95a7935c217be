package vcospec

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
)

func TestEmbeddedSwaggerUnchanged(t *testing.T) {
	sum := sha256.Sum256(swaggerJSON)
	if got := hex.EncodeToString(sum[:]); got != SHA256 {
		t.Fatalf("swagger.json changed: sha256 %s, want %s (see SOURCE.md)", got, SHA256)
	}
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.Operations()); n < 500 {
		t.Fatalf("only %d operations parsed", n)
	}
}

// TestCheckFindsViolations proves the checker is not vacuous: each case breaks one rule.
func TestCheckFindsViolations(t *testing.T) {
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	vmGet := "/api/1/customers/acme/cloudspaces/cs-1/vms/12"
	cases := []struct {
		name string
		ex   Exchange
		want string // Kind and Where, "kind@where"
	}{
		{"unknown route", Exchange{Method: "GET", Path: "/api/1/customers/acme/nothing", Status: 200}, KindUnknownRoute + "@"},
		{"wrong method", Exchange{Method: "PATCH", Path: vmGet, Status: 200}, KindUnknownRoute + "@"},
		{"unknown query param", Exchange{Method: "DELETE", Path: vmGet, Query: url.Values{"permanent": {"true"}}, Status: 200, Response: []byte(`{"success":true}`)}, KindUnknownParam + "@query.permanent"},
		{"bad boolean", Exchange{Method: "DELETE", Path: vmGet, Query: url.Values{"permanently": {"yes"}}, Status: 200, Response: []byte(`{"success":true}`)}, KindType + "@query.permanently"},
		{"non-integer path id", Exchange{Method: "GET", Path: "/api/1/customers/acme/cloudspaces/cs-1/vms/abc", Status: 404, Response: []byte(`{"message":"x"}`)}, KindType + "@path.vm_id"},
		{"missing required query", Exchange{Method: "POST", Path: "/api/1/customers/acme/cloudspaces/cs-1/vms", Query: url.Values{"name": {"a"}}, Status: 200, Response: []byte(`{"vm_id":1}`)}, KindMissingParam + "@query.vcpus"},
		{"string id where integer", Exchange{Method: "POST", Path: "/api/1/customers/acme/locations/l/disks", Query: url.Values{"disk_name": {"d"}, "description": {"d"}, "disk_size": {"1"}}, Status: 200, Response: []byte(`{"disk_id":"7"}`)}, KindType + "@response.disk_id"},
		{"unknown response field", Exchange{Method: "GET", Path: "/api/1/customers/acme/cloudspaces/cs-1/anti-affinity-groups/g", Status: 200, Response: []byte(`{"group_id":"g","spread":1,"status":"OK","owner":"me"}`)}, KindUnknownField + "@response.owner"},
		{"missing response field", Exchange{Method: "GET", Path: "/api/1/customers/acme/cloudspaces/cs-1/anti-affinity-groups/g", Status: 200, Response: []byte(`{"group_id":"g","spread":1}`)}, KindMissingField + "@response.status"},
		{"body where none", Exchange{Method: "DELETE", Path: vmGet, ContentType: "application/json", RequestBody: []byte(`{}`), Status: 200, Response: []byte(`{"success":true}`)}, KindBody + "@body"},
		{"unknown body field", Exchange{Method: "POST", Path: "/api/1/customers/acme/locations/l/gpus/p", ContentType: "application/json", RequestBody: []byte(`{"vgpu_name":"a","owner":"x"}`), Status: 200, Response: []byte(`{"vgpu_id":"v"}`)}, KindUnknownField + "@body.owner"},
		{"undocumented success code", Exchange{Method: "GET", Path: "/api/1/me", Status: 201, Response: []byte(`{}`)}, KindStatus + "@response"},
		{"error body shape", Exchange{Method: "GET", Path: "/api/1/me", Status: 404, Response: []byte(`not found`)}, KindBody + "@response"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, v := range s.Check(tc.ex) {
				got = append(got, v.Kind+"@"+v.Where)
			}
			for _, g := range got {
				if g == tc.want {
					return
				}
			}
			t.Fatalf("want %s among %s", tc.want, strings.Join(got, ", "))
		})
	}
}
