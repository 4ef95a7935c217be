package externaldns

import (
	"encoding/json"
	"testing"
)

// FuzzPlan: any change set external-dns could send is planned or refused, never a panic; every
// planned write is inside the filter and of a supported type, and the phases are in order.
func FuzzPlan(f *testing.F) {
	f.Add([]byte(`{"create":[{"dnsName":"web.apps.example.com","recordType":"A","targets":["203.0.113.10"]},{"dnsName":"a-web.apps.example.com","recordType":"TXT","targets":["\"heritage=external-dns\""]}]}`))
	f.Add([]byte(`{"updateOld":[{"dnsName":"x.apps.example.com","recordType":"CNAME","targets":["a"]}],"updateNew":[{"dnsName":"x.apps.example.com","recordType":"CNAME","targets":["b"]}],"delete":[{"dnsName":"y.apps.example.com","recordType":"A","targets":["203.0.113.10"]}]}`))
	current := []Record{{Domain: "y.apps.example.com", Type: "A", Value: "203.0.113.10", Cloudspace: "cs-1"}, {Domain: "x.apps.example.com", Type: "CNAME", Value: "a"}}
	filter := DomainFilter{Include: []string{"apps.example.com"}}
	f.Fuzz(func(t *testing.T, b []byte) {
		var ch Changes
		if json.Unmarshal(b, &ch) != nil {
			return
		}
		for _, l := range [][]*Endpoint{ch.Create, ch.UpdateOld, ch.UpdateNew, ch.Delete} {
			for _, ep := range l {
				if ep == nil {
					return // the handler's decoder yields no nil endpoints from a JSON object list
				}
			}
		}
		writes, _ := Plan(ch, current, Placement{"203.0.113.10": "cs-1"}, filter)
		for i, w := range writes {
			if !filter.Matches(w.Record.Domain) || (w.Record.Type != "A" && w.Record.Type != "TXT" && w.Record.Type != "CNAME") {
				t.Fatalf("planned %s", w)
			}
			if i > 0 && writes[i-1].Phase > w.Phase {
				t.Fatalf("phases out of order: %v", writes)
			}
		}
	})
}
