package externaldns

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/capx-io/capx/internal/vco"
)

// API is the part of the whitesky.cloud client the provider uses.
type API interface {
	ListCustomerDNSRecords(ctx context.Context) ([]vco.DNSRecord, error)
	CreateCloudspaceDNSRecord(ctx context.Context, cloudspaceID string, spec vco.DNSRecordSpec) error
	DeleteCloudspaceDNSRecord(ctx context.Context, cloudspaceID, domain, recordType string) error
	CreateCustomerDNSRecord(ctx context.Context, spec vco.DNSRecordSpec) error
	DeleteCustomerDNSRecord(ctx context.Context, domain, recordType, value string) error
	GetCloudspace(ctx context.Context, id string) (vco.Cloudspace, error)
}

// Defaults of the provider's knobs.
const (
	// DefaultWriteTimeout bounds one platform write: about 30 s normally, so four times that
	// before it counts as failed.
	DefaultWriteTimeout = 2 * time.Minute
	// DefaultParallelWrites is how many writes of one phase are in flight at once.
	DefaultParallelWrites = 4
)

// Provider answers the webhook's calls from the platform's records.
type Provider struct {
	API API
	// Cloudspaces are the cluster's cloudspaces: the ones whose records it sees and whose
	// public IPs its A records may name.
	Cloudspaces []string
	Filter      DomainFilter
	// WriteTimeout and ParallelWrites: zero means the defaults.
	WriteTimeout   time.Duration
	ParallelWrites int
	Log            logr.Logger
}

// Records lists the records external-dns may see: customer-level records and those on the
// cluster's cloudspaces, inside the domain filter, one endpoint per name and type.
func (p *Provider) Records(ctx context.Context) ([]*Endpoint, error) {
	current, err := p.current(ctx)
	if err != nil {
		return nil, err
	}
	byKey := map[[2]string]*Endpoint{}
	var out []*Endpoint
	for _, r := range current {
		if !p.Filter.Matches(r.Domain) || !slices.Contains(supportedTypes, r.Type) {
			continue
		}
		k := [2]string{r.Domain, r.Type}
		ep := byKey[k]
		if ep == nil {
			ep = &Endpoint{DNSName: r.Domain, RecordType: r.Type, RecordTTL: vco.DNSTTL}
			byKey[k] = ep
			out = append(out, ep)
		}
		if !slices.Contains(ep.Targets, r.Value) {
			ep.Targets = append(ep.Targets, r.Value)
		}
	}
	for _, ep := range out {
		slices.Sort(ep.Targets)
	}
	return out, nil
}

// current reads the records of the customer that belong to no cloudspace or to one of the
// cluster's.
func (p *Provider) current(ctx context.Context) ([]Record, error) {
	all, err := p.API.ListCustomerDNSRecords(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the DNS records: %w", err)
	}
	var out []Record
	for _, r := range all {
		if r.CloudspaceID != "" && !slices.Contains(p.Cloudspaces, r.CloudspaceID) {
			continue
		}
		out = append(out, Record{Cloudspace: r.CloudspaceID, Domain: normalize(r.Domain), Type: strings.ToUpper(r.Type), Value: r.Value})
	}
	return out, nil
}

// placement reads the cluster's cloudspaces' public IPs.
func (p *Provider) placement(ctx context.Context) (Placement, error) {
	at := Placement{}
	for _, id := range p.Cloudspaces {
		cs, err := p.API.GetCloudspace(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("read cloudspace %s: %w", id, err)
		}
		if cs.ExternalNetworkIP != "" {
			at[cs.ExternalNetworkIP] = id
		}
	}
	return at, nil
}

// AdjustEndpoints makes the desired endpoints what the platform can hold, so that external-dns
// does not plan a change on every loop for a difference the platform cannot keep: the TTL is
// always 3600 s. Endpoints the platform cannot hold at all are left out and logged.
func (p *Provider) AdjustEndpoints(eps []*Endpoint) []*Endpoint {
	out := make([]*Endpoint, 0, len(eps))
	for _, ep := range eps {
		if err := checkEndpoint(*ep, DomainFilter{}); err != nil {
			p.Log.Info("endpoint left out: whitesky.cloud DNS cannot hold it", "reason", err.Error())
			continue
		}
		if ep.RecordTTL != 0 && ep.RecordTTL != vco.DNSTTL {
			p.Log.V(1).Info("TTL set to the platform's fixed 3600 s", "name", ep.DNSName, "type", ep.RecordType, "asked", ep.RecordTTL)
		}
		ep.RecordTTL = vco.DNSTTL
		out = append(out, ep)
	}
	return out
}

// ApplyChanges plans a change set against the records that exist now and applies it phase by
// phase. It returns nil only when every write is done and nothing was refused.
func (p *Provider) ApplyChanges(ctx context.Context, ch Changes) error {
	current, err := p.current(ctx)
	if err != nil {
		return err
	}
	at, err := p.placement(ctx)
	if err != nil {
		return err
	}
	writes, problems := Plan(ch, current, at, p.Filter)
	for _, err := range problems {
		p.Log.Info("change refused", "reason", err.Error())
	}
	res := p.apply(ctx, writes)
	if res.err() == nil && len(problems) == 0 {
		return nil
	}
	return &ChangeSetError{Result: res, Refused: problems}
}

// Result is how far a change set got.
type Result struct {
	Planned    int
	Done       int
	Failed     []FailedWrite
	NotStarted int
}

// FailedWrite is a write the platform did not do (or did not confirm).
type FailedWrite struct {
	Write Write
	Err   error
}

func (r Result) err() error {
	if len(r.Failed) == 0 {
		return nil
	}
	return errors.New("failed writes")
}

// ChangeSetError says what part of a change set is not done, so the webhook's answer and the
// log name it; external-dns plans again on its next loop.
type ChangeSetError struct {
	Result  Result
	Refused []error
}

func (e *ChangeSetError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "change set not complete: %d of %d writes done", e.Result.Done, e.Result.Planned)
	for _, f := range e.Result.Failed {
		fmt.Fprintf(&b, "; %s failed: %v", f.Write, f.Err)
	}
	if e.Result.NotStarted > 0 {
		fmt.Fprintf(&b, "; %d later writes not started", e.Result.NotStarted)
	}
	for _, err := range e.Refused {
		fmt.Fprintf(&b, "; refused: %v", err)
	}
	return b.String()
}

// apply runs the writes phase by phase, up to ParallelWrites at once, and stops after a phase
// in which a write failed: the later phases depend on it.
func (p *Provider) apply(ctx context.Context, writes []Write) Result {
	res := Result{Planned: len(writes)}
	parallel := p.ParallelWrites
	if parallel <= 0 {
		parallel = DefaultParallelWrites
	}
	start := time.Now()
	for i := 0; i < len(writes); {
		j := i
		for j < len(writes) && writes[j].Phase == writes[i].Phase {
			j++
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, parallel)
		for _, w := range writes[i:j] {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				err := p.write(ctx, w)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					res.Failed = append(res.Failed, FailedWrite{Write: w, Err: err})
					p.Log.Info("DNS write failed", "phase", w.Phase.String(), "write", w.String(), "error", err.Error())
					return
				}
				res.Done++
				p.Log.Info("DNS write done", "phase", w.Phase.String(), "write", w.String(), "done", res.Done, "of", res.Planned,
					"elapsed", time.Since(start).Round(time.Millisecond).String())
			}()
		}
		wg.Wait()
		if len(res.Failed) > 0 {
			res.NotStarted = len(writes) - j
			return res
		}
		i = j
	}
	return res
}

// write does one platform call. A create that finds the record there and a delete that finds
// it gone are done: the platform did it on an earlier call whose answer was lost.
func (p *Provider) write(ctx context.Context, w Write) error {
	timeout := p.WriteTimeout
	if timeout <= 0 {
		timeout = DefaultWriteTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r := w.Record
	spec := vco.DNSRecordSpec{Domain: r.Domain, Type: r.Type, Value: r.Value}
	var err error
	switch {
	case w.Op == OpCreate && r.Cloudspace != "":
		spec.Value = "" // the platform takes the address from the cloudspace
		err = p.API.CreateCloudspaceDNSRecord(ctx, r.Cloudspace, spec)
	case w.Op == OpCreate:
		err = p.API.CreateCustomerDNSRecord(ctx, spec)
	case r.Cloudspace != "":
		err = p.API.DeleteCloudspaceDNSRecord(ctx, r.Cloudspace, r.Domain, r.Type)
	default:
		err = p.API.DeleteCustomerDNSRecord(ctx, r.Domain, r.Type, r.Value)
	}
	switch {
	case w.Op == OpCreate && errors.Is(err, vco.ErrConflict), w.Op == OpDelete && errors.Is(err, vco.ErrNotFound):
		return nil
	}
	return err
}
