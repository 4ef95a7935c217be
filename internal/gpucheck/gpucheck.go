package gpucheck

import (
	"slices"
	"time"

	"github.com/capx-io/capx/internal/capvco/gpuname"
	"github.com/capx-io/capx/internal/vco"
)

// Class is what a reservation is to CAPVCO.
type Class string

// The classes. The string values are part of the -o json contract.
const (
	// Owned: a live VCOMachine owns it (its name parses and the machine exists).
	Owned Class = "owned"
	// Orphaned: its name parses, but the machine or the whole cluster no longer exists.
	Orphaned Class = "orphaned"
	// Renamed: it looks like CAPVCO's (starts with "capvco") but does not parse, so no
	// teardown will ever release it.
	Renamed Class = "renamed"
	// AttachedForeign: it looks like CAPVCO's but is attached to a VM that is not its
	// machine's.
	AttachedForeign Class = "attached-foreign"
	// RecycleBin: it looks like CAPVCO's and was deleted without permanently=true: it sits
	// in the recycle bin, unattached and still billed, and no live machine uses it (one of a
	// machine being deleted is Owned: its teardown releases the recycle bin too).
	RecycleBin Class = "recycle-bin"
	// Unverified: its name parses but no management cluster was asked who owns it. An
	// unattached one is what the seed's `capvco-gpucheck -orphans` lists.
	Unverified Class = "unverified"
	// Foreign: not CAPVCO's at all; listed for completeness, never touched.
	Foreign Class = "foreign"
)

// Classes in the order reports show them.
var Classes = []Class{Orphaned, Renamed, RecycleBin, AttachedForeign, Unverified, Owned, Foreign}

// Reservation is a vGPU reservation as the platform listed it.
type Reservation struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Location string `json:"location"`
	Profile  string `json:"profile"`
	Status   string `json:"status"`
	// VM is the VM it is attached to; nil when unattached.
	VM *VM `json:"vm,omitempty"`
	// DeletedAt is set for a reservation in the recycle bin.
	DeletedAt *time.Time `json:"deletedAt,omitempty"`
	// offset is where the listing found it: where a re-read starts looking.
	offset int
}

// VM is the VM a reservation is attached to.
type VM struct {
	ID             int    `json:"id"`
	Name           string `json:"name"`
	CloudspaceID   string `json:"cloudspaceID"`
	CloudspaceName string `json:"cloudspaceName,omitempty"`
}

// Attached says whether the reservation is assigned to a VM.
func (r Reservation) Attached() bool { return r.VM != nil }

// fromAPI converts the client's shape; {"id": 0} and null both mean unattached.
func fromAPI(v vco.VGPU, location string) Reservation {
	r := Reservation{ID: v.ID, Name: v.Name, Location: v.Location, Profile: v.ProfileID, Status: v.Status}
	if r.Location == "" {
		r.Location = location
	}
	if v.Attached() {
		r.VM = &VM{ID: v.VM.ID, Name: v.VM.Name, CloudspaceID: v.VM.CloudspaceID, CloudspaceName: v.VM.CloudspaceName}
	}
	if v.DeletionTime != nil {
		t := time.Unix(*v.DeletionTime, 0).UTC()
		r.DeletedAt = &t
	}
	return r
}

// same says whether two reads of one reservation agree on everything a release decision
// rests on.
func (r Reservation) same(o Reservation) bool {
	if r.ID != o.ID || r.Name != o.Name || r.Profile != o.Profile || r.Attached() != o.Attached() {
		return false
	}
	if r.Attached() && r.VM.ID != o.VM.ID {
		return false
	}
	return (r.DeletedAt == nil) == (o.DeletedAt == nil)
}

// Owner is the parsed owner of a reservation name.
type Owner struct {
	Namespace string `json:"namespace"`
	Cluster   string `json:"cluster"`
	Machine   string `json:"machine"`
	Index     int    `json:"index"`
}

func ownerOf(n gpuname.Name) *Owner {
	return &Owner{Namespace: n.Namespace, Cluster: n.Cluster, Machine: n.Machine, Index: n.Index}
}

// Finding is one classified reservation.
type Finding struct {
	Reservation `json:",inline"`
	// Account names the credential's customer and API, for sweeps over several accounts.
	Account string `json:"account,omitempty"`
	Class   Class  `json:"class"`
	// Owner is who the name says owns it (nil when the name does not parse).
	Owner *Owner `json:"owner,omitempty"`
	// OwnerVerified is true when the management cluster was asked about Owner.
	OwnerVerified bool `json:"ownerVerified"`
	// Reason says why the class was given, in words.
	Reason string `json:"reason"`
	// Orphan marks what is billed and no one will release: what makes the check exit 1. It
	// is always unattached, except for AttachedForeign.
	Orphan bool `json:"orphan"`
	// Releasable marks the orphans `release` selects with no opt-in: unattached, named
	// exactly capvco_<ns>_<cluster>_<machine>_gpu_<n>, and confirmed ownerless by the
	// management cluster.
	Releasable bool `json:"releasable"`
	// ReleaseNeeds names the opt-in flag that makes `release` select an unattached orphan
	// that is not Releasable: OptInRenamed for a name that only starts with "capvco" (it
	// may be kept on purpose, or be another team's), OptInUnverified for an owner nobody
	// checked. --id selects a renamed one too. Empty otherwise.
	ReleaseNeeds string `json:"releaseNeeds,omitempty"`
	// BilledInRecycleBin is how long a recycle-bin reservation has been billed since it was
	// deleted: the only billed duration the platform tells (it has no reservation time).
	BilledInRecycleBin *Duration `json:"billedInRecycleBin,omitempty"`
}

// Duration prints as "3h12m" in text and JSON.
type Duration time.Duration

func (d Duration) String() string {
	return time.Duration(d).Truncate(time.Minute).String()
}

// MarshalText renders the duration as Go does, to the minute.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// LocationStatus says how far one location's listing got.
type LocationStatus struct {
	Account  string `json:"account,omitempty"`
	Location string `json:"location"`
	// Reservations is how many were read (all of them when Complete).
	Reservations int `json:"reservations"`
	// Complete is true only when every page was read and the count held.
	Complete bool `json:"complete"`
	// Error says why the listing is incomplete.
	Error string `json:"error,omitempty"`
}

// The opt-in flags of release, as ReleaseNeeds names them.
const (
	OptInRenamed    = "--include-renamed"
	OptInUnverified = "--allow-unverified"
)

// Summary counts a report.
type Summary struct {
	Reservations int `json:"reservations"`
	Orphans      int `json:"orphans"`
	// Releasable counts what `release` selects with no opt-in; ReleasableWith what each
	// opt-in flag adds.
	Releasable     int            `json:"releasable"`
	ReleasableWith map[string]int `json:"releasableWith,omitempty"`
	ByClass        map[Class]int  `json:"byClass"`
}

// Report is the outcome of a scan.
type Report struct {
	// OwnershipChecked is true when the management cluster was asked who owns each
	// reservation; OwnershipNote says why not otherwise.
	OwnershipChecked bool   `json:"ownershipChecked"`
	OwnershipNote    string `json:"ownershipNote,omitempty"`
	// Complete is true only when the locations were listed and every one was read to the
	// end. An incomplete report never means "no orphans".
	Complete  bool             `json:"complete"`
	Locations []LocationStatus `json:"locations"`
	Findings  []Finding        `json:"reservations"`
	Summary   Summary          `json:"summary"`

	merged bool // Merge has taken a first report
}

// Orphans returns the findings that are orphans.
func (r *Report) Orphans() []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Orphan {
			out = append(out, f)
		}
	}
	return out
}

// Merge appends other (another account's scan) to r.
func (r *Report) Merge(other *Report) {
	if !r.merged {
		r.merged = true
		r.OwnershipChecked, r.OwnershipNote, r.Complete = other.OwnershipChecked, other.OwnershipNote, other.Complete
	} else if r.OwnershipChecked != other.OwnershipChecked {
		r.OwnershipChecked = false
		if r.OwnershipNote == "" {
			r.OwnershipNote = other.OwnershipNote
		}
	}
	r.Complete = r.Complete && other.Complete
	r.Locations = append(r.Locations, other.Locations...)
	r.Findings = append(r.Findings, other.Findings...)
	sortFindings(r.Findings)
	r.summarize()
}

func (r *Report) summarize() {
	s := Summary{Reservations: len(r.Findings), ByClass: map[Class]int{}}
	for _, f := range r.Findings {
		s.ByClass[f.Class]++
		if f.Orphan {
			s.Orphans++
		}
		if f.Releasable {
			s.Releasable++
		}
		if f.ReleaseNeeds != "" {
			if s.ReleasableWith == nil {
				s.ReleasableWith = map[string]int{}
			}
			s.ReleasableWith[f.ReleaseNeeds]++
		}
	}
	r.Summary = s
}

// sortFindings orders by class (orphans first), then account, location and name.
func sortFindings(fs []Finding) {
	rank := map[Class]int{}
	for i, c := range Classes {
		rank[c] = i
	}
	slices.SortStableFunc(fs, func(a, b Finding) int {
		if d := rank[a.Class] - rank[b.Class]; d != 0 {
			return d
		}
		for _, p := range [][2]string{{a.Account, b.Account}, {a.Location, b.Location}, {a.Name, b.Name}, {a.ID, b.ID}} {
			if p[0] != p[1] {
				if p[0] < p[1] {
					return -1
				}
				return 1
			}
		}
		return 0
	})
}

// UnmarshalText reads what MarshalText wrote.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}
