package vcosim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"
)

// Snapshot is a deep copy of everything the simulator holds, for assertions. Destroyed
// VMs and cloudspaces appear with status DESTROYED; secrets and private keys never appear.
type Snapshot struct {
	Customers          []*Customer          `json:"customers"`
	Locations          []*Location          `json:"locations"`
	Principals         []*Principal         `json:"principals"`
	Images             []*Image             `json:"images"`
	Cloudspaces        []*Cloudspace        `json:"cloudspaces"`
	VMs                []*VM                `json:"vms"`
	Disks              []*Disk              `json:"disks"`
	VGPUs              []*VGPU              `json:"vgpus"`
	PortForwards       []*PortForward       `json:"port_forwards"`
	ServerPools        []*ServerPool        `json:"server_pools"`
	LoadBalancers      []*LoadBalancer      `json:"load_balancers"`
	DNSRecords         []*DNSRecord         `json:"dns_records"`
	Links              []*Link              `json:"links"`
	Certificates       []*Certificate       `json:"certificates"`
	AntiAffinityGroups []*AntiAffinityGroup `json:"anti_affinity_groups"`
}

// sortedValues returns a map's values ordered by key, so answers are deterministic.
func sortedValues[K cmp.Ordered, V any](m map[K]V) []V {
	keys := slices.Sorted(maps.Keys(m))
	out := make([]V, 0, len(keys))
	for _, k := range keys {
		out = append(out, m[k])
	}
	return out
}

// Snapshot copies the current state.
func (s *Sim) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	snap := Snapshot{
		Customers: sortedValues(st.Customers), Locations: sortedValues(st.Locations), Principals: sortedValues(st.Principals),
		Images: sortedValues(st.Images), Cloudspaces: sortedValues(st.Cloudspaces), VMs: sortedValues(st.VMs),
		Disks: sortedValues(st.Disks), PortForwards: sortedValues(st.PortForwards), ServerPools: sortedValues(st.ServerPools),
		LoadBalancers: sortedValues(st.LoadBalancers), DNSRecords: st.DNSRecords, Links: st.Links,
		Certificates: sortedValues(st.Certificates), AntiAffinityGroups: sortedValues(st.AntiAffinity),
	}
	for _, id := range st.VGPUOrder {
		snap.VGPUs = append(snap.VGPUs, st.VGPUs[id])
	}
	// A JSON round trip is a deep copy that also drops the json:"-" secrets.
	b, err := json.Marshal(snap)
	if err != nil {
		panic(fmt.Sprintf("vcosim: snapshot: %v", err))
	}
	var out Snapshot
	if err := json.Unmarshal(b, &out); err != nil {
		panic(fmt.Sprintf("vcosim: snapshot: %v", err))
	}
	return out
}

// Billed is a resource the customer pays for right now.
type Billed struct {
	Kind     string `json:"kind"` // vm, disk, vgpu, public_ip
	ID       string `json:"id"`
	Name     string `json:"name"`
	Customer string `json:"customer"`
	Location string `json:"location"`
	// InRecycleBin marks soft-deleted resources: still billed until deleted permanently.
	InRecycleBin bool `json:"in_recycle_bin"`
}

// Billed lists what is billed: VMs and disks until destroyed, vGPU reservations until
// released permanently (attached or not, soft-deleted or not), extra public IPs.
func (s *Sim) Billed() []Billed {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Billed
	for _, vm := range sortedValues(s.st.VMs) {
		if vm.Status != statusDestroyed {
			out = append(out, Billed{Kind: "vm", ID: fmt.Sprint(vm.ID), Name: vm.Name, Customer: vm.Customer,
				Location: s.st.Cloudspaces[vm.CloudspaceID].Location, InRecycleBin: vm.Status == statusDeleted})
		}
	}
	for _, d := range sortedValues(s.st.Disks) {
		out = append(out, Billed{Kind: "disk", ID: fmt.Sprint(d.ID), Name: d.Name, Customer: d.Customer, Location: d.Location, InRecycleBin: d.DeletedAt != nil})
	}
	for _, id := range s.st.VGPUOrder {
		v := s.st.VGPUs[id]
		out = append(out, Billed{Kind: "vgpu", ID: v.ID, Name: v.Name, Customer: v.Customer, Location: v.Location, InRecycleBin: v.DeletedAt != nil})
	}
	for _, cs := range sortedValues(s.st.Cloudspaces) {
		for i, ip := range cs.PublicIPs {
			if i > 0 {
				out = append(out, Billed{Kind: "public_ip", ID: ip.IP, Name: cs.Name, Customer: cs.Customer, Location: cs.Location, InRecycleBin: cs.Status == statusDeleted})
			}
		}
	}
	return out
}

// Requests returns the request log (most recent last).
func (s *Sim) Requests() []RequestRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqLog)
}

// ResetRequests empties the request log.
func (s *Sim) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqLog = nil
}

// RenameVGPU renames a reservation the way a user can in the portal; the API has no call for
// it. A renamed capvco_* reservation is no longer recognisable by its owner.
func (s *Sim) RenameVGPU(id, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.st.VGPUs[id]
	if v == nil {
		return fmt.Errorf("no vGPU %q", id)
	}
	v.Name = name
	return s.persist()
}

// ReserveVGPUs reserves many unattached vGPUs at once (for benchmarks and orphan tests),
// skipping the profile's instance limit. It returns the new ids in order.
func (s *Sim) ReserveVGPUs(customer, location, gpuID string, names ...string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	loc := s.st.Locations[location]
	if loc == nil || s.st.Customers[customer] == nil {
		return nil, fmt.Errorf("unknown customer %q or location %q", customer, location)
	}
	i := slices.IndexFunc(loc.GPUProfiles, func(p *GPUProfile) bool { return p.ID == gpuID })
	if i < 0 {
		return nil, fmt.Errorf("no GPU profile %q in %s", gpuID, location)
	}
	ids := make([]string, 0, len(names))
	for _, n := range names {
		ids = append(ids, s.reserve(customer, location, loc.GPUProfiles[i], n, 0, s.opts.Now().Unix()).ID)
	}
	return ids, s.persist()
}

// AddPrincipal adds (or replaces) an identity, e.g. a cloudspace-scoped service account.
// A ClientID without a Secret gets a random secret, returned.
func (s *Sim) AddPrincipal(p Principal) (secret string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.Customers[p.Customer] == nil {
		return "", fmt.Errorf("unknown customer %q", p.Customer)
	}
	if p.Name == "" {
		return "", fmt.Errorf("a principal needs a name")
	}
	if p.ClientID != "" && p.Secret == "" {
		p.Secret = randomHex(24)
	}
	p.Grants = slices.Clone(p.Grants)
	s.st.Principals[p.Name] = &p
	return p.Secret, s.persist()
}

// ClientSecret returns a principal's client secret, for printing credentials.
func (s *Sim) ClientSecret(principal string) (clientID, secret string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.st.Principals[principal]
	if p == nil {
		return "", "", fmt.Errorf("no principal %q", principal)
	}
	return p.ClientID, p.Secret, nil
}

// LocationDown makes cross-location lists report the location as failing (its items are
// missing and its "locations" entry carries an error), as a partial answer from the real API.
func (f *Faults) LocationDown(location string, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down == nil {
		f.down = map[string]bool{}
	}
	f.down[location] = down
}

func (f *Faults) locationDown(location string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down[location]
}

// HTTP inspection and control, for tests that run cmd/vcosim out of process. Operator only.

func (s *Sim) inspectRoutes() []*route {
	get, put, post, del := http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete
	op := authOperator
	return []*route{
		{Route: Route{Method: get, Base: simBase, Path: "/state"}, auth: op, handle: func(*call) (any, error) { return s.snapshotLocked(), nil }},
		{Route: Route{Method: get, Base: simBase, Path: "/billing"}, auth: op, handle: func(*call) (any, error) { return s.billedLocked(), nil }},
		{Route: Route{Method: get, Base: simBase, Path: "/requests"}, auth: op, handle: func(*call) (any, error) { return slices.Clone(s.reqLog), nil }},
		{Route: Route{Method: put, Base: simBase, Path: "/faults", Body: true}, auth: op, handle: s.putFaults},
		{Route: Route{Method: del, Base: simBase, Path: "/faults"}, auth: op, handle: func(*call) (any, error) { s.faults.Reset(); return success(), nil }},
		{Route: Route{Method: post, Base: simBase, Path: "/principals", Body: true}, auth: op, handle: s.postPrincipal},
		{Route: Route{Method: put, Base: simBase, Path: "/vgpus/{vgpu_id}/name", Query: []string{"name"}}, auth: op, handle: s.putVGPUName},
		{Route: Route{Method: put, Base: simBase, Path: "/locations/{location}/down", Query: []string{"down"}}, auth: op, handle: s.putLocationDown},
	}
}

// The HTTP handlers run with s.mu held, so they use the *Locked variants.
func (s *Sim) snapshotLocked() Snapshot {
	s.mu.Unlock()
	defer s.mu.Lock()
	return s.Snapshot()
}

func (s *Sim) billedLocked() []Billed {
	s.mu.Unlock()
	defer s.mu.Lock()
	return s.Billed()
}

// FaultSet is the body of PUT /sim/v1/faults. Durations are Go duration strings ("250ms").
type FaultSet struct {
	Rules   []WireFault            `json:"rules"`
	Scripts map[string][]WireFault `json:"scripts"`
	Replace bool                   `json:"replace"` // drop existing faults first
}

// WireFault is Fault with string durations.
type WireFault struct {
	Route      string  `json:"route"`
	Rate       float64 `json:"rate,omitempty"`
	Count      int     `json:"count,omitempty"`
	Latency    string  `json:"latency,omitempty"`
	Status     int     `json:"status,omitempty"`
	Message    string  `json:"message,omitempty"`
	RetryAfter string  `json:"retry_after,omitempty"`
	Timeout    bool    `json:"timeout,omitempty"`
	Hang       string  `json:"hang,omitempty"`
	Apply      bool    `json:"apply,omitempty"`
}

// Fault converts the wire form.
func (w WireFault) Fault() (Fault, error) {
	f := Fault{Route: w.Route, Rate: w.Rate, Count: w.Count, Status: w.Status, Message: w.Message, Timeout: w.Timeout, Apply: w.Apply}
	for _, d := range []struct {
		in  string
		out *time.Duration
	}{{w.Latency, &f.Latency}, {w.RetryAfter, &f.RetryAfter}, {w.Hang, &f.Hang}} {
		if d.in == "" {
			continue
		}
		v, err := time.ParseDuration(d.in)
		if err != nil {
			return Fault{}, fmt.Errorf("fault %q: %w", w.Route, err)
		}
		*d.out = v
	}
	return f, nil
}

// Apply installs a fault set.
func (f *Faults) Apply(set FaultSet) error {
	var rules []Fault
	for _, w := range set.Rules {
		r, err := w.Fault()
		if err != nil {
			return err
		}
		rules = append(rules, r)
	}
	scripts := map[string][]Fault{}
	for key, steps := range set.Scripts {
		for _, w := range steps {
			st, err := w.Fault()
			if err != nil {
				return err
			}
			scripts[key] = append(scripts[key], st)
		}
	}
	if set.Replace {
		f.Reset()
	}
	f.Add(rules...)
	for key, steps := range scripts {
		f.Script(key, steps...)
	}
	return nil
}

func (s *Sim) putFaults(c *call) (any, error) {
	var set FaultSet
	if err := c.decode(&set); err != nil {
		return nil, err
	}
	if err := s.faults.Apply(set); err != nil {
		return nil, badRequest("Bad Request: %v", err)
	}
	return success(), nil
}

func (s *Sim) postPrincipal(c *call) (any, error) {
	var in struct {
		Principal
		Secret string `json:"client_secret"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	in.Principal.Secret = in.Secret
	s.mu.Unlock()
	secret, err := s.AddPrincipal(in.Principal)
	var tok string
	if err == nil {
		tok, err = s.Token(in.Name, 0)
	}
	s.mu.Lock()
	if err != nil {
		return nil, badRequest("Bad Request: %v", err)
	}
	return map[string]string{"name": in.Name, "client_id": in.ClientID, "client_secret": secret, "jwt": tok}, nil
}

func (s *Sim) putVGPUName(c *call) (any, error) {
	name := c.reqStr("name")
	if err := c.validation(); err != nil {
		return nil, err
	}
	v := s.st.VGPUs[c.path("vgpu_id")]
	if v == nil {
		return nil, notFound("NotFound: vGPU %s not found", c.path("vgpu_id"))
	}
	v.Name = name
	return success(), nil
}

func (s *Sim) putLocationDown(c *call) (any, error) {
	down := c.boolean("down", true)
	if err := c.validation(); err != nil {
		return nil, err
	}
	if s.st.Locations[c.path("location")] == nil {
		return nil, notFound("NotFound: location %s", c.path("location"))
	}
	s.faults.LocationDown(c.path("location"), down)
	return success(), nil
}

// buildRoutes assembles every route, grouped by API area.
func (s *Sim) buildRoutes() []*route {
	var all []*route
	for _, group := range [][]*route{
		s.accountRoutes(), s.cloudspaceRoutes(), s.vmRoutes(), s.imageRoutes(), s.diskRoutes(), s.networkRoutes(), s.nicRoutes(),
		s.ingressRoutes(), s.dnsRoutes(), s.vgpuRoutes(), s.connectedRoutes(), s.certificateRoutes(), s.antiAffinityRoutes(),
		s.iamRoutes(), s.inspectRoutes(),
	} {
		all = append(all, group...)
	}
	return all
}
