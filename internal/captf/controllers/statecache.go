package controllers

import (
	"context"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/outputs"
	"github.com/capx-io/capx/internal/captf/state"
	"github.com/capx-io/capx/internal/captf/statekey"
)

// decodeConcurrency bounds the state fetches and decodes running at once across the manager.
// One decode holds at most a few times state.MaxValueBytes, whatever the state holds; bounding
// how many run together keeps a burst of reconciles (10 per kind) from multiplying that.
const decodeConcurrency = 2

// stateCache remembers what the engine read from each object's state Secrets, keyed by their
// names and resourceVersions as the metadata cache lists them: a state is fetched (live: the
// manager caches no Secret data) and decoded again only when one of its Secrets changed, which
// is once per serial the backend writes. It keeps no state data and no output values: the
// snapshot's facts (state.Snapshot.Compact) and the outputs as the kind's contract mapped them.
type stateCache struct {
	// master decrypts encrypted states in memory (nil: plain states only).
	master  *statekey.Master
	sem     chan struct{}
	mu      sync.Mutex
	entries map[string]*stateEntry
}

type stateEntry struct {
	versions string
	snap     *state.Snapshot                     // compact; nil when err is set
	err      error                               // a state.Reason error: the state is unreadable as it is
	outs     map[outputs.Options]*outputs.Result // the outputs as mapped with each options
}

func newStateCache(master *statekey.Master) *stateCache {
	return &stateCache{master: master, sem: make(chan struct{}, decodeConcurrency), entries: map[string]*stateEntry{}}
}

// read returns the state of suffix and whether it was decoded just now (then the snapshot still
// holds its data and output values). meta lists Secret metadata (the manager's cache); live
// reads whole Secrets from the API server.
func (c *stateCache) read(ctx context.Context, meta, live client.Reader, namespace, suffix string) (*state.Snapshot, bool, error) {
	versions, err := stateVersions(ctx, meta, namespace, suffix)
	if err != nil {
		return nil, false, err
	}
	key := namespace + "/" + suffix
	c.mu.Lock()
	e := c.entries[key]
	c.mu.Unlock()
	if e != nil && e.versions == versions {
		return e.snap, false, e.err
	}
	snap, err := c.decode(ctx, live, namespace, suffix)
	if err != nil && state.Reason(err) == "" {
		return nil, false, err // the API server's error: nothing learnt
	}
	e = &stateEntry{versions: versions, err: err}
	if snap != nil {
		e.snap = snap.Compact()
	}
	c.mu.Lock()
	c.entries[key] = e
	c.mu.Unlock()
	return snap, true, err
}

// decode fetches and decodes a state, waiting for a free slot.
func (c *stateCache) decode(ctx context.Context, live client.Reader, namespace, suffix string) (*state.Snapshot, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-c.sem }()
	return state.ReadWith(ctx, live, namespace, suffix, c.master)
}

// full returns the snapshot with its data, fetching it again when the cache kept only the facts;
// nil when the state changed since (the next pass sees the change).
func (c *stateCache) full(ctx context.Context, live client.Reader, snap *state.Snapshot) (*state.Snapshot, error) {
	if !snap.Compacted() {
		return snap, nil
	}
	fresh, err := c.decode(ctx, live, snap.Namespace, snap.Suffix)
	if err != nil || fresh.Digest != snap.Digest {
		return nil, client.IgnoreNotFound(ignoreReason(err))
	}
	return fresh, nil
}

// outputs maps the state's outputs with opts, once per state and options (an object and its
// machines read a cluster's outputs with different options): from the snapshot's own values
// when it still has them, else from a fresh read. nil when the state changed meanwhile.
func (c *stateCache) outputs(ctx context.Context, live client.Reader, snap *state.Snapshot, opts outputs.Options,
	mapOutputs func(map[string]state.Output) *outputs.Result) (*outputs.Result, error) {
	key := snap.Namespace + "/" + snap.Suffix
	c.mu.Lock()
	e := c.entries[key]
	var out *outputs.Result
	if e != nil && e.snap != nil && e.snap.Digest == snap.Digest {
		out = e.outs[opts]
	}
	c.mu.Unlock()
	if out != nil {
		return out, nil
	}
	full, err := c.full(ctx, live, snap)
	if err != nil || full == nil {
		return nil, err
	}
	out = mapOutputs(full.Outputs)
	c.mu.Lock()
	if e := c.entries[key]; e != nil && e.snap != nil && e.snap.Digest == snap.Digest {
		if e.outs == nil {
			e.outs = map[outputs.Options]*outputs.Result{}
		}
		e.outs[opts] = out
	}
	c.mu.Unlock()
	return out, nil
}

// forget drops what the cache knows of a state (the object is gone).
func (c *stateCache) forget(namespace, suffix string) {
	c.mu.Lock()
	delete(c.entries, namespace+"/"+suffix)
	c.mu.Unlock()
}

// stateVersions lists the names and resourceVersions of the Secrets the backend's selector
// finds for suffix, from the metadata cache.
func stateVersions(ctx context.Context, meta client.Reader, namespace, suffix string) (string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := meta.List(ctx, list, client.InNamespace(namespace), state.Selector(suffix)); err != nil {
		return "", err
	}
	v := make([]string, 0, len(list.Items))
	for _, m := range list.Items {
		v = append(v, m.Name+"@"+m.ResourceVersion+"@"+string(m.UID))
	}
	slices.Sort(v)
	return strings.Join(v, ","), nil
}

func ignoreReason(err error) error {
	if state.Reason(err) != "" {
		return nil
	}
	return err
}
