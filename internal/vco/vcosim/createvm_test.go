package vcosim

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// TestCreateVMBodyAsTheSwaggerSays: the create body is VMCreateExtentions. Its defaults
// ({"userdata": {}, ...}) mean no user data; a value of the wrong type or a body that is not
// JSON is answered in the API's error shape, naming the field and the swagger type, without
// a word of Go's decoder. (Today's HEAD, 4d97e0c, answered "json: cannot unmarshal string into
// Go struct field ..." and stored the default as "#cloud-config\n{}".)
func TestCreateVMBodyAsTheSwaggerSays(t *testing.T) {
	s := NewTestServer(t, Options{})
	tok := token(t, s, SeedClusterPrinc)
	code, body := do(t, s, "POST", "/api/1/customers/acme/cloudspaces", tok, `{"name":"b","location":"`+SeedLocation+`","firewall":{"private":false}}`)
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
	create := func(name, payload string) (int, string) {
		q := url.Values{"name": {name}, "description": {name}, "vcpus": {"1"}, "memory": {"1024"}, "image_id": {itoaTest(img)}}
		return do(t, s, "POST", "/api/1/customers/acme/cloudspaces/"+cs.ID+"/vms?"+q.Encode(), tok, payload)
	}
	userData := func(name string) (string, bool) {
		for _, vm := range s.Snapshot().VMs {
			if vm.Name == name {
				return vm.UserData, true
			}
		}
		return "", false
	}

	for name, payload := range map[string]string{
		"defaults":      `{"userdata":{},"UserDataParameters":{},"gpu_id":"","vgpu_name":""}`,
		"userdata-only": `{"userdata":{}}`,
		"null":          `{"userdata":null}`,
	} {
		if code, body := create(name, payload); code != 200 {
			t.Fatalf("%s: %d %s", name, code, body)
		}
		if ud, ok := userData(name); !ok || ud != "" {
			t.Errorf("%s: user data %q, want none", name, ud)
		}
	}

	for _, tc := range []struct {
		name, payload, field, want string
	}{
		{"string-userdata", `{"userdata":"runcmd: [echo hi]"}`, "userdata", "a JSON string is not of type 'object'"},
		{"array-userdata", `{"userdata":["x"]}`, "userdata", "a JSON array is not of type 'object'"},
		{"number-gpu", `{"gpu_id":5}`, "gpu_id", "a JSON number is not of type 'string'"},
		{"object-user-data", `{"user_data":{"a":1}}`, "user_data", "a JSON object is not of type 'string'"},
		{"not-json", `{"userdata":`, "", "Failed to decode JSON object"},
		{"not-an-object", `[1,2]`, "payload", "a JSON array is not of type 'object'"},
	} {
		code, body := create(tc.name, tc.payload)
		var answer struct {
			Message string            `json:"message"`
			Errors  map[string]string `json:"errors"`
		}
		if err := json.Unmarshal([]byte(body), &answer); code != 400 || err != nil || answer.Message == "" {
			t.Errorf("%s: %d %s, want 400 {\"message\": ...}", tc.name, code, body)
			continue
		}
		got := answer.Message
		if tc.field != "" {
			got = answer.Errors[tc.field]
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: %s, want %q", tc.name, body, tc.want)
		}
		for _, internal := range []string{"Go struct", "Go value", "interface {}", "unmarshal", "json:", "unexpected end", "wireVMCreateBody"} {
			if strings.Contains(body, internal) {
				t.Errorf("%s: the answer shows Go internals (%q): %s", tc.name, internal, body)
			}
		}
		if _, ok := userData(tc.name); ok {
			t.Errorf("%s: a VM was created from a refused body", tc.name)
		}
	}
}
