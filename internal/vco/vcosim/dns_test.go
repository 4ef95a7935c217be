package vcosim

import (
	"encoding/json"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// TestDNSWriteOnCloudspaceDeletedMeanwhile: a cloudspace deleted while one of its DNS writes
// takes its time takes the write down with it: the create answers 404 (400 for a cloudspace
// only moved to the recycle bin) and leaves no record behind, which no cloudspace would hold.
// (Today's HEAD, 4d97e0c, completed the write.)
func TestDNSWriteOnCloudspaceDeletedMeanwhile(t *testing.T) {
	for _, tc := range []struct {
		permanently string
		code        int
		message     string
	}{{"true", 404, "NotFound: Cloudspace"}, {"false", 400, "is deleted"}} {
		t.Run("permanently="+tc.permanently, func(t *testing.T) {
			var s *Server
			var once sync.Once
			var csID, tok string
			deleted := 0
			s = NewTestServer(t, Options{DNSWriting: func(string) {
				once.Do(func() {
					deleted, _ = do(t, s, "DELETE", "/api/1/customers/acme/cloudspaces/"+csID+"?permanently="+tc.permanently, tok, "")
				})
			}})
			tok = token(t, s, SeedClusterPrinc)
			code, body := do(t, s, "POST", "/api/1/customers/acme/cloudspaces", tok, `{"name":"d","location":"`+SeedLocation+`","firewall":{"private":false}}`)
			if code != 200 {
				t.Fatalf("cloudspace: %d %s", code, body)
			}
			var cs struct {
				ID string `json:"cloudspace_id"`
			}
			_ = json.Unmarshal([]byte(body), &cs)
			csID = cs.ID
			q := url.Values{"domain": {"api.c1.acme.example"}, "type": {"A"}}
			code, body = do(t, s, "POST", "/api/1/alpha/customers/acme/cloudspaces/"+csID+"/dns?"+q.Encode(), tok, "")
			if deleted != 200 {
				t.Fatalf("the cloudspace delete during the write answered %d", deleted)
			}
			if code != tc.code || !strings.Contains(body, tc.message) || !strings.Contains(body, `"message"`) {
				t.Fatalf("the write answered %d %s, want %d %q", code, body, tc.code, tc.message)
			}
			if recs := s.Snapshot().DNSRecords; len(recs) != 0 {
				t.Fatalf("the write left %d records", len(recs))
			}
		})
	}
}
