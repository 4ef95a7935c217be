package vcosim

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// dnsTTL is fixed by the platform; no API model even has a TTL field.
const dnsTTL = 3600

var dnsTypes = []string{"A", "AAAA", "MX", "NS", "CNAME", "TXT", "SRV", "CAA"}

var dnsCreateQuery = []string{"domain", "type", "service", "protocol", "port", "weight", "priority", "value", "caa_domain", "flag", "tag"}

func (s *Sim) dnsRoutes() []*route {
	const cs = "/alpha/customers/{customer_id}/cloudspaces/{cloudspace_id}/dns"
	const cu = "/alpha/customers/{customer_id}/dns-records"
	return []*route{
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: cs, Query: []string{"cs_only"}}, handle: s.listCloudspaceDNS},
		{Route: Route{Method: http.MethodPost, Base: apiBase, Path: cs, Query: dnsCreateQuery}, handle: s.createCloudspaceDNS},
		{Route: Route{Method: http.MethodDelete, Base: apiBase, Path: cs + "/{domain}", Query: []string{"record_type"}}, handle: s.deleteCloudspaceDNS},
		{Route: Route{Method: http.MethodGet, Base: apiBase, Path: cu}, handle: s.listCustomerDNS},
		{Route: Route{Method: http.MethodPost, Base: apiBase, Path: cu, Query: dnsCreateQuery}, handle: s.createCustomerDNS},
		{Route: Route{Method: http.MethodDelete, Base: apiBase, Path: cu, Query: []string{"record_type", "domain_name", "value"}}, handle: s.deleteCustomerDNS},
	}
}

// dnsRecordFromQuery reads the shared create arguments.
func (c *call) dnsRecordFromQuery(customer string) (*DNSRecord, error) {
	r := &DNSRecord{Customer: customer, Domain: strings.TrimSuffix(strings.ToLower(c.reqStr("domain")), "."), Type: strings.ToUpper(c.str("type")),
		Service: c.str("service"), Protocol: c.str("protocol"), Port: c.int("port", 0), Weight: c.int("weight", 0),
		Priority: c.int("priority", 0), Value: c.str("value"), CAADomain: c.str("caa_domain"), Tag: c.str("tag"), TTL: dnsTTL}
	if c.has("flag") {
		r.Flag = strconv.Itoa(c.int("flag", 0))
	}
	if err := c.validation(); err != nil {
		return nil, err
	}
	if r.Type == "" {
		r.Type = "A"
	}
	if !slices.Contains(dnsTypes, r.Type) {
		return nil, badRequest("Bad Request: type must be one of %s", strings.Join(dnsTypes, ", "))
	}
	if !strings.Contains(r.Domain, ".") || strings.ContainsAny(r.Domain, " /_:") && r.Type != "SRV" {
		return nil, &apiError{status: http.StatusBadRequest, message: "InvalidDomainError: " + r.Domain + " is not a valid domain name"}
	}
	return r, nil
}

func (s *Sim) sameRecord(a, b *DNSRecord) bool {
	return a.Customer == b.Customer && a.CloudspaceID == b.CloudspaceID && a.Domain == b.Domain && a.Type == b.Type && a.Value == b.Value
}

// addDNS stores a record after the platform's slow write, re-checking for a duplicate that a
// concurrent write may have added meanwhile, and for the record's cloudspace: one deleted
// during the write takes the write down with it, as on the platform, instead of leaving a
// record that no cloudspace holds.
func (s *Sim) addDNS(c *call, r *DNSRecord) (any, error) {
	if slices.ContainsFunc(s.st.DNSRecords, func(o *DNSRecord) bool { return s.sameRecord(o, r) }) {
		return nil, conflict("Conflict: DnsRecord %s %s already exists", r.Domain, r.Type)
	}
	c.dnsWrite(r.Domain)
	if r.CloudspaceID != "" {
		switch cs := s.st.Cloudspaces[r.CloudspaceID]; {
		case cs == nil || cs.Status == statusDestroyed:
			return nil, notFound("NotFound: Cloudspace %s not found", r.CloudspaceID)
		case cs.Status == statusDeleted:
			return nil, badRequest("Bad Request: Cloudspace %s is deleted", r.CloudspaceID)
		}
	}
	if slices.ContainsFunc(s.st.DNSRecords, func(o *DNSRecord) bool { return s.sameRecord(o, r) }) {
		return nil, conflict("Conflict: DnsRecord %s %s already exists", r.Domain, r.Type)
	}
	s.st.DNSRecords = append(s.st.DNSRecords, r)
	return success(), nil
}

// dnsWrite is the platform's slow DNS write, with the lock released (Options.DNSWriting).
func (c *call) dnsWrite(domain string) {
	if hook := c.sim.opts.DNSWriting; hook != nil {
		c.sim.mu.Unlock()
		hook(domain)
		c.sim.mu.Lock()
	}
	c.slow(c.sim.delays.DNSWrite)
}

func (s *Sim) listCloudspaceDNS(c *call) (any, error) {
	cs, err := c.cloudspace(PermRead)
	if err != nil {
		return nil, err
	}
	_ = c.boolean("cs_only", false)
	if err := c.validation(); err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, r := range s.st.DNSRecords {
		if r.CloudspaceID == cs.ID {
			out = append(out, map[string]any{"value": r.Value, "domain_name": r.Domain, "type": r.Type, "priority": r.Priority,
				"weight": r.Weight, "service": r.Service, "protocol": r.Protocol, "port": r.Port, "tag": r.Tag, "flag": r.Flag, "caa_domain": r.CAADomain})
		}
	}
	if len(out) == 0 {
		return nil, notFound("DnsRecord matching query does not exist.")
	}
	return list(out), nil
}

// createCloudspaceDNS ignores value for A/AAAA records: the address is the cloudspace's
// public IP, as on the platform.
func (s *Sim) createCloudspaceDNS(c *call) (any, error) {
	cs, err := c.cloudspace(PermCreate)
	if err != nil {
		return nil, err
	}
	r, err := c.dnsRecordFromQuery(cs.Customer)
	if err != nil {
		return nil, err
	}
	r.CloudspaceID = cs.ID
	if r.Type == "A" || r.Type == "AAAA" {
		if cs.PrimaryIP() == "" {
			return nil, badRequest("Bad Request: cloudspace %s has no external IP to point an %s record at", cs.ID, r.Type)
		}
		r.Value = cs.PrimaryIP()
	} else if r.Value == "" {
		return nil, badRequest("Bad Request: value is required for %s records", r.Type)
	}
	return s.addDNS(c, r)
}

func (s *Sim) deleteCloudspaceDNS(c *call) (any, error) {
	cs, err := c.cloudspace(PermDelete)
	if err != nil {
		return nil, err
	}
	typ := strings.ToUpper(c.reqStr("record_type"))
	if err := c.validation(); err != nil {
		return nil, err
	}
	domain := strings.TrimSuffix(strings.ToLower(c.path("domain")), ".")
	match := func(r *DNSRecord) bool { return r.CloudspaceID == cs.ID && r.Domain == domain && r.Type == typ }
	if !slices.ContainsFunc(s.st.DNSRecords, match) {
		return nil, notFound("DnsRecord matching query does not exist.")
	}
	c.dnsWrite(domain)
	s.st.DNSRecords = slices.DeleteFunc(s.st.DNSRecords, match)
	return success(), nil
}

func (s *Sim) listCustomerDNS(c *call) (any, error) {
	cu, err := c.customerWith(PermRead)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, r := range s.st.DNSRecords {
		if r.Customer == cu.ID {
			out = append(out, map[string]any{"value": r.Value, "domain_name": r.Domain, "cloudspace_id": nullable(r.CloudspaceID), "vm_id": nil,
				"nic_ip": nil, "type": r.Type, "service": r.Service, "protocol": r.Protocol, "weight": strconv.Itoa(r.Weight),
				"priority": strconv.Itoa(r.Priority), "port": strconv.Itoa(r.Port), "tag": r.Tag, "flag": r.Flag, "caa_domain": r.CAADomain})
		}
	}
	return list(out), nil
}

// createCustomerDNS keeps value for A records: a customer-level record hangs on no resource,
// so the value is the only source of an address (documented design choice).
func (s *Sim) createCustomerDNS(c *call) (any, error) {
	cu, err := c.customerWith(PermCreate)
	if err != nil {
		return nil, err
	}
	r, err := c.dnsRecordFromQuery(cu.ID)
	if err != nil {
		return nil, err
	}
	if r.Value == "" {
		return nil, badRequest("Bad Request: value is required for a customer-level %s record", r.Type)
	}
	return s.addDNS(c, r)
}

func (s *Sim) deleteCustomerDNS(c *call) (any, error) {
	cu, err := c.customerWith(PermDelete)
	if err != nil {
		return nil, err
	}
	typ, domain, value := strings.ToUpper(c.reqStr("record_type")), strings.TrimSuffix(strings.ToLower(c.reqStr("domain_name")), "."), c.str("value")
	if err := c.validation(); err != nil {
		return nil, err
	}
	match := func(r *DNSRecord) bool {
		return r.Customer == cu.ID && r.CloudspaceID == "" && r.Domain == domain && r.Type == typ && (value == "" || r.Value == value)
	}
	if !slices.ContainsFunc(s.st.DNSRecords, match) {
		return nil, notFound("DnsRecord matching query does not exist.")
	}
	c.dnsWrite(domain)
	s.st.DNSRecords = slices.DeleteFunc(s.st.DNSRecords, match)
	return success(), nil
}
