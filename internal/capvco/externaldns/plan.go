package externaldns

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Record is one platform record: the cloudspace it hangs on ("" for a customer-level record),
// its name, type and value. On a cloudspace an A record's value is the cloudspace's public IP,
// whatever the write said; a customer-level record keeps its value.
type Record struct {
	Cloudspace string
	Domain     string
	Type       string
	Value      string
}

func (r Record) String() string {
	where := "customer"
	if r.Cloudspace != "" {
		where = "cloudspace " + r.Cloudspace
	}
	return fmt.Sprintf("%s %s %q on %s", r.Type, r.Domain, r.Value, where)
}

// Op is what a write does.
type Op string

// The two writes the platform offers: there is no update.
const (
	OpCreate Op = "create"
	OpDelete Op = "delete"
)

// Phase orders a change set's writes. Every write of a phase is done before the next phase
// starts, so an interrupted change set leaves what external-dns can plan from again: a record
// never exists without the TXT record that makes it external-dns's, and a TXT record goes only
// once the record it owns is gone.
type Phase int

const (
	// PhaseClaim creates ownership (TXT) records.
	PhaseClaim Phase = iota
	// PhaseClear deletes records first where a name changes between CNAME and another type,
	// which cannot share a name.
	PhaseClear
	// PhaseCreate creates records (and the new targets of updates) before PhaseRemove drops
	// the old ones, so an update has no gap.
	PhaseCreate
	// PhaseRemove deletes records.
	PhaseRemove
	// PhaseRelease deletes ownership (TXT) records.
	PhaseRelease
)

func (p Phase) String() string {
	return [...]string{"claim", "clear", "create", "remove", "release"}[p]
}

// Write is one platform call of a change set.
type Write struct {
	Phase  Phase
	Op     Op
	Record Record
}

func (w Write) String() string { return fmt.Sprintf("%s %s", w.Op, w.Record) }

// supportedTypes are the record types this provider writes: the platform's types whose value
// it keeps (TXT, CNAME) and the address types it takes from the cloudspace (A).
var supportedTypes = []string{"A", "TXT", "CNAME"}

// Placement is where address records can go: the public IP of each of the cluster's
// cloudspaces, ip -> cloudspace id.
type Placement map[string]string

// Plan turns a change set into ordered writes against the records that exist now. Writes
// whose effect is already there are left out, so a change set planned again after a partial
// failure only does what is missing. What cannot be written (a name outside the filter, an
// address on none of the cluster's cloudspaces, an unsupported type) is returned as problems;
// the rest is still planned.
func Plan(ch Changes, current []Record, at Placement, filter DomainFilter) (writes []Write, problems []error) {
	add, remove := map[Record]bool{}, map[Record]bool{}
	collect := func(eps []*Endpoint, into map[Record]bool, place func(Endpoint, string) (Record, error)) {
		for _, ep := range eps {
			if err := checkEndpoint(*ep, filter); err != nil {
				problems = append(problems, err)
				continue
			}
			for _, t := range ep.Targets {
				r, err := place(*ep, t)
				if err != nil {
					problems = append(problems, err)
					continue
				}
				into[r] = true
			}
		}
	}
	collect(ch.Create, add, at.place)
	collect(ch.UpdateNew, add, at.place)
	find := func(ep Endpoint, target string) (Record, error) { return locate(current, ep, target), nil }
	collect(ch.UpdateOld, remove, find)
	collect(ch.Delete, remove, find)
	for r := range add {
		if remove[r] { // an update that keeps a target
			delete(add, r)
			delete(remove, r)
		}
	}
	for r := range add {
		if !slices.Contains(current, r) {
			writes = append(writes, Write{Phase: createPhase(r), Op: OpCreate, Record: r})
		}
	}
	for r := range remove {
		if r.Domain != "" && slices.Contains(current, r) {
			writes = append(writes, Write{Phase: deletePhase(r, add), Op: OpDelete, Record: r})
		}
	}
	slices.SortFunc(writes, func(a, b Write) int {
		return cmp.Or(cmp.Compare(a.Phase, b.Phase), strings.Compare(a.Record.Domain, b.Record.Domain),
			strings.Compare(a.Record.Type, b.Record.Type), strings.Compare(a.Record.Cloudspace, b.Record.Cloudspace),
			strings.Compare(a.Record.Value, b.Record.Value))
	})
	return writes, problems
}

func checkEndpoint(ep Endpoint, filter DomainFilter) error {
	switch {
	case !filter.Matches(ep.DNSName):
		return fmt.Errorf("%s %s is outside the domain filter %s", ep.RecordType, ep.DNSName, filter)
	case !slices.Contains(supportedTypes, ep.RecordType):
		return fmt.Errorf("%s %s: the whitesky.cloud webhook writes %s records only", ep.RecordType, ep.DNSName, strings.Join(supportedTypes, ", "))
	case ep.SetIdentifier != "":
		return fmt.Errorf("%s %s: set identifier %q: whitesky.cloud DNS has no routing policies", ep.RecordType, ep.DNSName, ep.SetIdentifier)
	}
	return nil
}

// place says where a new record goes: an A record on the cloudspace whose public IP it
// names (the platform takes the address from there), anything else on the customer.
func (at Placement) place(ep Endpoint, target string) (Record, error) {
	name := normalize(ep.DNSName)
	if ep.RecordType != "A" {
		return Record{Domain: name, Type: ep.RecordType, Value: target}, nil
	}
	cs, ok := at[target]
	if !ok {
		return Record{}, fmt.Errorf("A %s -> %s: %s is the public IP of none of the cluster's cloudspaces, and whitesky.cloud DNS takes an A record's address from the cloudspace it is on", name, target, target)
	}
	return Record{Cloudspace: cs, Domain: name, Type: "A", Value: target}, nil
}

// locate finds the existing record an old endpoint's target stands for (the zero Record when
// it is gone already).
func locate(current []Record, ep Endpoint, target string) Record {
	name := normalize(ep.DNSName)
	for _, r := range current {
		if r.Domain == name && r.Type == ep.RecordType && r.Value == target {
			return r
		}
	}
	return Record{}
}

func createPhase(r Record) Phase {
	if r.Type == "TXT" {
		return PhaseClaim
	}
	return PhaseCreate
}

// deletePhase puts a delete before the creates when one of them would put a CNAME beside
// another type on the same name (or another type beside a CNAME).
func deletePhase(r Record, add map[Record]bool) Phase {
	if r.Type == "TXT" {
		return PhaseRelease
	}
	for a := range add {
		if a.Domain == r.Domain && a.Type != "TXT" && a.Type != r.Type && (a.Type == "CNAME" || r.Type == "CNAME") {
			return PhaseClear
		}
	}
	return PhaseRemove
}

// normalize is the platform's spelling of a name: lower case, no trailing dot.
func normalize(name string) string { return strings.TrimSuffix(strings.ToLower(name), ".") }

// Matches says whether a name is one of the filter's domains or below one, and not excluded.
// An empty include list matches every name.
func (f DomainFilter) Matches(name string) bool {
	name = normalize(name)
	under := func(d string) bool {
		d = normalize(strings.TrimPrefix(d, "."))
		return name == d || strings.HasSuffix(name, "."+d)
	}
	if slices.ContainsFunc(f.Exclude, under) {
		return false
	}
	return len(f.Include) == 0 || slices.ContainsFunc(f.Include, under)
}

func (f DomainFilter) String() string {
	if len(f.Include) == 0 && len(f.Exclude) == 0 {
		return "(every domain)"
	}
	s := "[" + strings.Join(f.Include, ", ") + "]"
	if len(f.Exclude) > 0 {
		s += " except [" + strings.Join(f.Exclude, ", ") + "]"
	}
	return s
}
