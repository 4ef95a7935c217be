package externaldns

import (
	"slices"
	"strings"
	"testing"
)

const (
	cs1 = "cs-1"
	ip1 = "203.0.113.10"
	own = `"heritage=external-dns,external-dns/owner=k1,external-dns/resource=service/default/web"`
)

var at = Placement{ip1: cs1}

func ep(name, typ string, targets ...string) *Endpoint {
	return &Endpoint{DNSName: name, RecordType: typ, Targets: targets}
}

func writes(ws []Write) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Phase.String()+" "+w.String())
	}
	return out
}

// TestPlan is the rulebook of a change set's order: ownership before records, records before
// their ownership goes, creates before removals in an update, CNAME conflicts cleared first,
// and nothing written that is already so.
func TestPlan(t *testing.T) {
	txt := Record{Domain: "a-web.apps.example.com", Type: "TXT", Value: own}
	a := Record{Cloudspace: cs1, Domain: "web.apps.example.com", Type: "A", Value: ip1}
	filter := DomainFilter{Include: []string{"apps.example.com"}}
	for _, tc := range []struct {
		name     string
		changes  Changes
		current  []Record
		want     []string
		problems int
	}{{
		name:    "a new Service: its TXT record first, then its A record on the cloudspace of its IP",
		changes: Changes{Create: []*Endpoint{ep("web.apps.example.com", "A", ip1), ep("a-web.apps.example.com", "TXT", own)}},
		want:    []string{"claim create " + txt.String(), "create create " + a.String()},
	}, {
		name:    "a deleted Service: its A record, then its TXT record",
		changes: Changes{Delete: []*Endpoint{ep("a-web.apps.example.com", "TXT", own), ep("web.apps.example.com", "A", ip1)}},
		current: []Record{txt, a},
		want:    []string{"remove delete " + a.String(), "release delete " + txt.String()},
	}, {
		name:    "planned again after the TXT record was written: only the A record is left",
		changes: Changes{Create: []*Endpoint{ep("web.apps.example.com", "A", ip1), ep("a-web.apps.example.com", "TXT", own)}},
		current: []Record{txt},
		want:    []string{"create create " + a.String()},
	}, {
		name:    "a delete of what is gone writes nothing",
		changes: Changes{Delete: []*Endpoint{ep("web.apps.example.com", "A", ip1)}},
	}, {
		name: "an update creates the new target before it removes the old",
		changes: Changes{UpdateOld: []*Endpoint{ep("www.apps.example.com", "CNAME", "old.example.net")},
			UpdateNew: []*Endpoint{ep("www.apps.example.com", "CNAME", "new.example.net")}},
		current: []Record{{Domain: "www.apps.example.com", Type: "CNAME", Value: "old.example.net"}},
		want: []string{`create create CNAME www.apps.example.com "new.example.net" on customer`,
			`remove delete CNAME www.apps.example.com "old.example.net" on customer`},
	}, {
		name: "an update that keeps a target writes nothing for it",
		changes: Changes{UpdateOld: []*Endpoint{ep("web.apps.example.com", "A", ip1)},
			UpdateNew: []*Endpoint{{DNSName: "web.apps.example.com", RecordType: "A", Targets: []string{ip1}, RecordTTL: 3600}}},
		current: []Record{a},
	}, {
		name: "an A record replaced by a CNAME is deleted first: the two cannot share a name",
		changes: Changes{Delete: []*Endpoint{ep("web.apps.example.com", "A", ip1)},
			Create: []*Endpoint{ep("web.apps.example.com", "CNAME", "lb.example.net")}},
		current: []Record{a},
		want:    []string{"clear delete " + a.String(), `create create CNAME web.apps.example.com "lb.example.net" on customer`},
	}, {
		name:     "an address on no cloudspace of the cluster is refused; the rest is planned",
		changes:  Changes{Create: []*Endpoint{ep("x.apps.example.com", "A", "198.51.100.7"), ep("a-web.apps.example.com", "TXT", own)}},
		want:     []string{"claim create " + txt.String()},
		problems: 1,
	}, {
		name:     "a name outside the domain filter is refused",
		changes:  Changes{Create: []*Endpoint{ep("web.other.example.org", "A", ip1)}},
		problems: 1,
	}, {
		name:     "an unsupported type is refused",
		changes:  Changes{Create: []*Endpoint{ep("apps.example.com", "MX", "10 mail.example.com")}},
		problems: 1,
	}, {
		name:    "names are written in the platform's spelling",
		changes: Changes{Create: []*Endpoint{ep("WEB.Apps.Example.com.", "A", ip1)}},
		want:    []string{"create create " + a.String()},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ws, problems := Plan(tc.changes, tc.current, at, filter)
			if got := writes(ws); !slices.Equal(got, tc.want) {
				t.Errorf("writes:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tc.want, "\n     "))
			}
			if len(problems) != tc.problems {
				t.Errorf("problems = %v, want %d", problems, tc.problems)
			}
		})
	}
}

func TestDomainFilter(t *testing.T) {
	f := DomainFilter{Include: []string{"example.com"}, Exclude: []string{"internal.example.com"}}
	for name, want := range map[string]bool{
		"example.com": true, "a.example.com.": true, "A.EXAMPLE.COM": true, "badexample.com": false,
		"x.internal.example.com": false, "example.org": false,
	} {
		if got := f.Matches(name); got != want {
			t.Errorf("Matches(%q) = %v", name, got)
		}
	}
	if !(DomainFilter{}).Matches("anything.example") {
		t.Error("an empty filter matches nothing")
	}
}
