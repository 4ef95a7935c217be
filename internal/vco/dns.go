package vco

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
)

// DNS lives under /alpha. Writes take about 30 s (the API blocks), TTL is always 3600 and
// cannot be set, and an A record on a cloudspace points at the cloudspace's public IP: its
// value argument is ignored.

const (
	pathCloudspaceDNS = "/alpha" + pathCloudspace + "/dns"
	pathCustomerDNS   = "/alpha/customers/{customer_id}/dns-records"
)

var (
	opListCloudspaceDNS   = get("ListCloudspaceDNSRecords", pathCloudspaceDNS)
	opCreateCloudspaceDNS = post("CreateCloudspaceDNSRecord", pathCloudspaceDNS)
	opDeleteCloudspaceDNS = del("DeleteCloudspaceDNSRecord", pathCloudspaceDNS+"/{domain}")
	opListCustomerDNS     = get("ListCustomerDNSRecords", pathCustomerDNS)
	opCreateCustomerDNS   = post("CreateCustomerDNSRecord", pathCustomerDNS)
	opDeleteCustomerDNS   = del("DeleteCustomerDNSRecord", pathCustomerDNS)
)

// DNSTTL is the platform's fixed TTL in seconds.
const DNSTTL = 3600

// DNSRecord is a record on a cloudspace or on the customer.
type DNSRecord struct {
	Domain       string `json:"domain_name"`
	Type         string `json:"type"`
	Value        string `json:"value"`
	Priority     int    `json:"-"`
	Weight       int    `json:"-"`
	Port         int    `json:"-"`
	Service      string `json:"service"`
	Protocol     string `json:"protocol"`
	CloudspaceID string `json:"-"`
}

// UnmarshalJSON reads the numbers, which one list sends as strings.
func (r *DNSRecord) UnmarshalJSON(b []byte) error {
	type plain DNSRecord
	var w struct {
		plain
		Priority     flexInt    `json:"priority"`
		Weight       flexInt    `json:"weight"`
		Port         flexInt    `json:"port"`
		CloudspaceID flexString `json:"cloudspace_id"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = DNSRecord(w.plain)
	r.Priority, r.Weight, r.Port, r.CloudspaceID = int(w.Priority), int(w.Weight), int(w.Port), string(w.CloudspaceID)
	return nil
}

// DNSRecordSpec creates a record. Value is ignored for A/AAAA on a cloudspace.
type DNSRecordSpec struct {
	Domain   string
	Type     string // A (default), AAAA, CNAME, TXT, MX, NS, SRV, CAA
	Value    string
	Priority int
	Weight   int
	Port     int
	Service  string
	Protocol string
}

func (s DNSRecordSpec) query() query {
	typ := strings.ToUpper(s.Type)
	if typ == "" {
		typ = "A"
	}
	return query{}.str("domain", s.Domain).str("type", typ).str("value", s.Value).int("priority", s.Priority).
		int("weight", s.Weight).int("port", s.Port).str("service", s.Service).str("protocol", s.Protocol)
}

// ListCloudspaceDNSRecords lists a cloudspace's records. The API answers 404 when there are
// none; that comes back as an empty list.
func (c *Client) ListCloudspaceDNSRecords(ctx context.Context, cloudspaceID string) ([]DNSRecord, error) {
	var out resultList[DNSRecord]
	err := c.do(ctx, opListCloudspaceDNS, call{path: args(cloudspaceID)}, &out)
	if errors.Is(err, ErrNotFound) && strings.Contains(err.Error(), "DnsRecord matching query does not exist") {
		return nil, nil
	}
	for i := range out.Result {
		out.Result[i].CloudspaceID = cloudspaceID
	}
	return out.Result, err
}

// CreateCloudspaceDNSRecord creates a record on a cloudspace (slow: about 30 s).
func (c *Client) CreateCloudspaceDNSRecord(ctx context.Context, cloudspaceID string, spec DNSRecordSpec) error {
	return c.do(ctx, opCreateCloudspaceDNS, call{path: args(cloudspaceID), query: spec.query().values()}, nil)
}

// DeleteCloudspaceDNSRecord deletes every record of a name and type on a cloudspace.
func (c *Client) DeleteCloudspaceDNSRecord(ctx context.Context, cloudspaceID, domain, recordType string) error {
	return c.do(ctx, opDeleteCloudspaceDNS, call{path: args(cloudspaceID, domain), query: query{}.str("record_type", strings.ToUpper(recordType)).values()}, nil)
}

// ListCustomerDNSRecords lists every record of the customer, cloudspace records included.
func (c *Client) ListCustomerDNSRecords(ctx context.Context) ([]DNSRecord, error) {
	var out resultList[DNSRecord]
	err := c.do(ctx, opListCustomerDNS, call{}, &out)
	return out.Result, err
}

// CreateCustomerDNSRecord creates a record that hangs on no resource.
func (c *Client) CreateCustomerDNSRecord(ctx context.Context, spec DNSRecordSpec) error {
	return c.do(ctx, opCreateCustomerDNS, call{query: spec.query().values()}, nil)
}

// DeleteCustomerDNSRecord deletes customer-level records of a name and type (only the one
// with value, when value is set).
func (c *Client) DeleteCustomerDNSRecord(ctx context.Context, domain, recordType, value string) error {
	q := query{}.str("record_type", strings.ToUpper(recordType)).str("domain_name", domain).str("value", value)
	return c.do(ctx, opDeleteCustomerDNS, call{query: q.values()}, nil)
}
