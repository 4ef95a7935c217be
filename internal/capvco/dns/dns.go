// Package dns publishes the control-plane endpoint's A record without ever blocking a
// reconcile: a platform DNS write takes about 30 s, so writes run in the background, one at a
// time per record, and reconciles only read and report progress.
package dns

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/capx-io/capx/internal/vco"
)

// TTLSeconds is the platform's fixed TTL (no API override).
const TTLSeconds = vco.DNSTTL

// API is what this package calls.
type API interface {
	ListCloudspaceDNSRecords(ctx context.Context, cloudspaceID string) ([]vco.DNSRecord, error)
	CreateCloudspaceDNSRecord(ctx context.Context, cloudspaceID string, spec vco.DNSRecordSpec) error
	DeleteCloudspaceDNSRecord(ctx context.Context, cloudspaceID, domain, recordType string) error
}

// WriteTimeout bounds one background write.
const WriteTimeout = 5 * time.Minute

// Progress is where a record stands.
type Progress struct {
	// Done: the record is published (Ensure) or gone (Delete).
	Done bool
	// Since is when the write in flight started (zero when none is).
	Since time.Time
	// Err is the last background write's failure; the next call starts a new write.
	Err error
}

type op struct {
	started time.Time
	done    bool
	err     error
}

// Writer runs the background writes. The zero value is not usable: use NewWriter.
type Writer struct {
	mu  sync.Mutex
	ops map[string]*op
	now func() time.Time
}

// NewWriter returns a Writer.
func NewWriter() *Writer { return &Writer{ops: map[string]*op{}, now: time.Now} }

// Ensure reports whether the A record domain exists on the cloudspace and, when it does not,
// makes sure a write is under way; notify is called when that write ends.
func (w *Writer) Ensure(ctx context.Context, api API, cloudspaceID, domain string, notify func()) (Progress, error) {
	return w.run(ctx, api, cloudspaceID, domain, true, notify)
}

// Delete is Ensure's inverse: Done once the record is gone.
func (w *Writer) Delete(ctx context.Context, api API, cloudspaceID, domain string, notify func()) (Progress, error) {
	return w.run(ctx, api, cloudspaceID, domain, false, notify)
}

func (w *Writer) run(ctx context.Context, api API, cloudspaceID, domain string, want bool, notify func()) (Progress, error) {
	recs, err := api.ListCloudspaceDNSRecords(ctx, cloudspaceID)
	if errors.Is(err, vco.ErrNotFound) && !want {
		return Progress{Done: true}, nil // the cloudspace is gone, and its records with it
	}
	if err != nil {
		return Progress{}, fmt.Errorf("list DNS records: %w", err)
	}
	exists := hasA(recs, domain)
	key := fmt.Sprintf("%s/%s/%t", cloudspaceID, strings.ToLower(strings.TrimSuffix(domain, ".")), want)
	w.mu.Lock()
	defer w.mu.Unlock()
	cur := w.ops[key]
	if exists == want {
		if cur != nil && cur.done {
			delete(w.ops, key)
		}
		return Progress{Done: true}, nil
	}
	if cur != nil && !cur.done {
		return Progress{Since: cur.started}, nil
	}
	var last error
	if cur != nil {
		last = cur.err
	}
	o := &op{started: w.now()}
	w.ops[key] = o
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), WriteTimeout)
		defer cancel()
		var err error
		if want {
			err = api.CreateCloudspaceDNSRecord(ctx, cloudspaceID, vco.DNSRecordSpec{Domain: domain, Type: "A"})
			if errors.Is(err, vco.ErrConflict) {
				err = nil
			}
		} else {
			err = api.DeleteCloudspaceDNSRecord(ctx, cloudspaceID, domain, "A")
			if errors.Is(err, vco.ErrNotFound) {
				err = nil
			}
		}
		w.mu.Lock()
		o.done, o.err = true, err
		w.mu.Unlock()
		if notify != nil {
			notify()
		}
	}()
	return Progress{Since: o.started, Err: last}, nil
}

func hasA(recs []vco.DNSRecord, domain string) bool {
	for _, r := range recs {
		if strings.EqualFold(r.Type, "A") && strings.EqualFold(strings.TrimSuffix(r.Domain, "."), strings.TrimSuffix(domain, ".")) {
			return true
		}
	}
	return false
}
