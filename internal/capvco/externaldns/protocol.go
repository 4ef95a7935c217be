// Package externaldns is the whitesky.cloud provider of ExternalDNS, served over ExternalDNS's
// webhook protocol (version 1): external-dns runs with --provider=webhook and calls this
// program on loopback for the records, the endpoint adjustments and every change set.
//
// Platform DNS writes block for about 30 s each and the TTL is fixed at 3600 s. A change set is
// therefore planned into ordered phases (ownership TXT records before the records they own,
// records removed before their TXT), applied phase by phase with a bounded number of writes
// in flight, logged write by write, and answered only when every write is done: a failed write
// stops the later phases and fails the whole call with what was and was not done, so
// external-dns plans again from the records that exist and the change set converges.
package externaldns

// MediaType is the webhook protocol's content type; external-dns refuses any other.
const MediaType = "application/external.dns.webhook+json;version=1"

// Endpoint is one name and type with its targets, as external-dns sends and expects it.
// Fields this provider does not act on (labels, provider-specific properties) travel through
// AdjustEndpoints untouched: external-dns's TXT registry reads its labels from them.
type Endpoint struct {
	DNSName          string             `json:"dnsName,omitempty"`
	Targets          []string           `json:"targets,omitempty"`
	RecordType       string             `json:"recordType,omitempty"`
	SetIdentifier    string             `json:"setIdentifier,omitempty"`
	RecordTTL        int64              `json:"recordTTL,omitempty"`
	Labels           map[string]string  `json:"labels,omitempty"`
	ProviderSpecific []ProviderProperty `json:"providerSpecific,omitempty"`
}

// ProviderProperty is one provider-specific setting of an endpoint.
type ProviderProperty struct {
	Name  string `json:"name,omitempty"`
	Value string `json:"value,omitempty"`
}

// Changes is one change set: what external-dns's plan wants created, updated and deleted.
// UpdateOld and UpdateNew pair up by name and type.
type Changes struct {
	Create    []*Endpoint `json:"create,omitempty"`
	UpdateOld []*Endpoint `json:"updateOld,omitempty"`
	UpdateNew []*Endpoint `json:"updateNew,omitempty"`
	Delete    []*Endpoint `json:"delete,omitempty"`
}

// DomainFilter is what the negotiation answers: the domains this provider manages.
type DomainFilter struct {
	Include []string `json:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
}
