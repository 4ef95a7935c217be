package vco

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzDecodeResponses feeds arbitrary bytes to every response decoder: the API's answers are
// untrusted input, and the swagger is loose about types, so decoding must never panic.
func FuzzDecodeResponses(f *testing.F) {
	for _, seed := range []string{
		`{"result":[{"vm_id":1,"cloudspace_id":7,"disks":[1,2],"image_id":null}]}`,
		`{"vm_id":1,"cloudspace_id":"cs-1","disks":[{"disk_id":3,"disk_type":"BOOT"}],"boot_disk_id":"3"}`,
		`{"locations":[{"location":"l","status":"ERROR"}],"result":[{"cloudspace_id":"x","external_networks":[[{"id":1,"ip":"1.2.3.4"}]]}]}`,
		`{"pagination":{"limit":25,"pages":1,"count":1},"data":[{"vgpu_id":"v","virtual_machine":{"id":0},"deletion_time":null}]}`,
		`{"result":[{"domain_name":"a","weight":"10","priority":"x","port":5}]}`,
		`{"disk_id":1,"vm_id":null,"iotune":{"iops":2000.5}}`,
		`{"message":"Input payload validation failed","errors":{"name":"Missing"}}`,
		`"eyJhbGciOiJIUzI1NiJ9.eyJleHAiOjF9.sig"`, `[]`, `null`, `{`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		targets := []any{
			&resultList[VM]{}, &VM{}, &resultList[Cloudspace]{}, &Cloudspace{}, &resultList[Disk]{}, &Disk{},
			&resultList[DNSRecord]{}, &resultList[PublicIP]{}, &resultList[PortForward]{}, &LoadBalancer{},
			&resultList[VGPU]{}, &VGPUPage{}, &Certificate{}, &User{},
		}
		for _, v := range targets {
			_ = json.Unmarshal(b, v)
		}
		e := newAPIError(op{name: "Fuzz", method: "GET", path: "/x"}, 400, b, 0)
		if len(e.Message) > maxMessage+len("…") {
			t.Fatalf("message not bounded: %d bytes", len(e.Message))
		}
		if jwtPattern.MatchString(e.Error()) {
			t.Fatalf("a JWT-shaped string survived redaction: %q", e.Error())
		}
		_, _ = parseTokenBody(b)
		_ = parseRetryAfter(string(b), time.Now())
	})
}

// FuzzTokenExpiry: tokens come from the Secret and the IAM; reading exp must not panic, and
// an error is one of the fixed texts, so it never echoes the token. (Checking that the error
// does not contain the input fails for any input that is part of those texts, such as "JWT".)
func FuzzTokenExpiry(f *testing.F) {
	f.Add("eyJhbGciOiJIUzI1NiJ9.eyJleHAiOjE3MDAwMDAwMDB9.c2ln")
	f.Add("eyJhbGciOiJIUzI1NiJ9.eyJleHAiOiJzb29uIn0.c2ln") // exp is a string
	f.Add("a.b.c")
	f.Add("malformed")
	f.Add("")
	f.Fuzz(func(t *testing.T, raw string) {
		_, err := tokenExpiry(raw)
		if err != nil && err != errMalformedJWT && err != errJWTExp {
			t.Fatalf("tokenExpiry(%q) returned an error other than its fixed ones: %v", raw, err)
		}
	})
}

func TestExpandEscapes(t *testing.T) {
	c := &Client{customer: "acme"}
	got, err := c.expand(pathCloudspaceDNS+"/{domain}", []string{"cs/1", "a.example"})
	if err != nil || got != "/alpha/customers/acme/cloudspaces/cs%2F1/dns/a.example" {
		t.Fatalf("got %q %v", got, err)
	}
	if _, err := c.expand(pathCloudspace, []string{""}); err == nil {
		t.Fatal("an empty id must be refused, not turned into a list call")
	}
}

func TestBackoff(t *testing.T) {
	c := &Client{opts: Options{BaseBackoff: time.Second, MaxBackoff: 30 * time.Second}}
	for attempt := 1; attempt < 40; attempt++ {
		if d := c.backoff(attempt, 0); d <= 0 || d > 30*time.Second {
			t.Fatalf("attempt %d: %v", attempt, d)
		}
	}
	if d := c.backoff(1, 45*time.Second); d != 45*time.Second {
		t.Fatalf("Retry-After not honoured: %v", d)
	}
}
