// Package dns publishes the control-plane endpoint's A record without ever blocking a
// reconcile: a platform DNS write takes about 30 s, so writes run in the background, one at a
// time per record, and reconciles only read and report progress.
//
// A record has one write at a time, whichever way: a delete asked for while the record's create
// is still running (a cluster deleted during its first DNS write) waits for that create and then
// runs, and is done only once the record is gone. A delete that reported done while its own
// create was still on its way would leave the record behind for good.
package dns

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

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

// op is one background write of a record.
type op struct {
	want    bool // create (true) or delete
	started time.Time
	done    bool
	err     error
	// then is the write asked for while this one ran the other way: it starts as soon as this
	// one ends.
	then *pending
}

type pending struct {
	want   bool
	api    API
	ctx    context.Context
	notify func()
}

// Writer runs the background writes. The zero value is not usable: use NewWriter.
type Writer struct {
	mu    sync.Mutex
	ops   map[string]*op // by record (cloudspace and domain), either way
	clock clock.PassiveClock
}

// NewWriter returns a Writer whose Progress.Since comes from c.
func NewWriter(c clock.PassiveClock) *Writer { return &Writer{ops: map[string]*op{}, clock: c} }

// Ensure reports whether the A record domain exists on the cloudspace and, when it does not,
// makes sure a write is under way; notify is called when that write ends.
func (w *Writer) Ensure(ctx context.Context, api API, cloudspaceID, domain string, notify func()) (Progress, error) {
	return w.run(ctx, api, cloudspaceID, domain, true, notify)
}

// Delete is Ensure's inverse: Done once the record is gone and no create of it is under way.
func (w *Writer) Delete(ctx context.Context, api API, cloudspaceID, domain string, notify func()) (Progress, error) {
	return w.run(ctx, api, cloudspaceID, domain, false, notify)
}

func (w *Writer) run(ctx context.Context, api API, cloudspaceID, domain string, want bool, notify func()) (Progress, error) {
	key := cloudspaceID + "/" + strings.ToLower(strings.TrimSuffix(domain, "."))
	w.mu.Lock()
	cur := w.ops[key]
	if cur != nil && !cur.done {
		// A write of this record is under way: this call's answer is the record after it.
		if cur.want != want {
			cur.then = &pending{want: want, api: api, ctx: context.WithoutCancel(ctx), notify: notify}
		} else {
			cur.then = nil // asked back before the other way started: nothing to undo
		}
		w.mu.Unlock()
		return Progress{Since: cur.started}, nil
	}
	w.mu.Unlock()

	recs, err := api.ListCloudspaceDNSRecords(ctx, cloudspaceID)
	if errors.Is(err, vco.ErrNotFound) && !want {
		return Progress{Done: true}, nil // the cloudspace is gone, and its records with it
	}
	if err != nil {
		return Progress{}, fmt.Errorf("list DNS records: %w", err)
	}
	exists := hasA(recs, domain)

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ops[key] != cur {
		// A write started while the list was read: it may not show yet. Ask again later.
		return Progress{Since: w.ops[key].started}, nil
	}
	if exists == want {
		if cur != nil {
			delete(w.ops, key)
		}
		return Progress{Done: true}, nil
	}
	var last error
	if cur != nil && cur.want == want {
		last = cur.err
	}
	return Progress{Since: w.start(key, api, ctx, cloudspaceID, domain, want, notify).started, Err: last}, nil
}

// start runs a write in the background; w.mu is held.
func (w *Writer) start(key string, api API, ctx context.Context, cloudspaceID, domain string, want bool, notify func()) *op {
	o := &op{want: want, started: w.clock.Now()}
	w.ops[key] = o
	go func() {
		err := write(ctx, api, cloudspaceID, domain, want)
		logWrite(ctx, cloudspaceID, domain, want, err)
		w.mu.Lock()
		o.done, o.err = true, err
		next := o.then
		if next != nil {
			w.start(key, next.api, next.ctx, cloudspaceID, domain, next.want, next.notify)
		}
		w.mu.Unlock()
		if notify != nil {
			notify()
		}
	}()
	return o
}

// write creates or deletes the A record; the other outcome being there already is success.
func write(ctx context.Context, api API, cloudspaceID, domain string, want bool) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), WriteTimeout)
	defer cancel()
	if want {
		err := api.CreateCloudspaceDNSRecord(ctx, cloudspaceID, vco.DNSRecordSpec{Domain: domain, Type: "A"})
		if errors.Is(err, vco.ErrConflict) {
			return nil
		}
		return err
	}
	err := api.DeleteCloudspaceDNSRecord(ctx, cloudspaceID, domain, "A")
	if errors.Is(err, vco.ErrNotFound) {
		return nil
	}
	return err
}

// logWrite is the one line a background write leaves: the record, which way, and how it ended.
func logWrite(ctx context.Context, cloudspaceID, domain string, want bool, err error) {
	log := logr.FromContextOrDiscard(ctx).WithValues("cloudspaceID", cloudspaceID, "record", domain, "type", "A")
	switch {
	case err != nil && want:
		log.Error(err, "Creating DNS record failed; the next reconcile starts another write")
	case err != nil:
		log.Error(err, "Deleting DNS record failed; the next reconcile starts another write")
	case want:
		log.Info("Created DNS record")
	default:
		log.Info("Deleted DNS record")
	}
}

func hasA(recs []vco.DNSRecord, domain string) bool {
	for _, r := range recs {
		if strings.EqualFold(r.Type, "A") && strings.EqualFold(strings.TrimSuffix(r.Domain, "."), strings.TrimSuffix(domain, ".")) {
			return true
		}
	}
	return false
}
