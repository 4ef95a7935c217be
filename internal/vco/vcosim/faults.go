package vcosim

import (
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Fault is one injected misbehaviour. Exactly one of Status or Timeout is usually set;
// Latency alone just slows the call down.
type Fault struct {
	// Route selects the calls: "METHOD /path/template" as in Route.Key(), e.g.
	// "POST /customers/{customer_id}/cloudspaces/{cloudspace_id}/vms". A trailing "*" matches
	// any suffix; "" or "*" matches every route.
	Route string `json:"route"`
	// Rate is the chance (0..1] that a matching call is hit; 0 means always.
	Rate float64 `json:"rate,omitempty"`
	// Count limits how many calls are hit; 0 means no limit.
	Count int `json:"count,omitempty"`
	// Latency is added before the call is served (not scaled by TimeScale).
	Latency time.Duration `json:"latency,omitempty"`
	// Status answers the call with this code (e.g. 500, 503, 429) and Message.
	Status  int    `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	// RetryAfter is sent with a 429 (default 1 s).
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// Timeout holds the call until the caller gives up (or for Hang), then answers 504.
	Timeout bool          `json:"timeout,omitempty"`
	Hang    time.Duration `json:"hang,omitempty"`
	// Apply performs the operation before failing, so the caller cannot know it happened:
	// the case idempotent creates must handle by looking the name up again.
	Apply bool `json:"apply,omitempty"`
}

func (f *Fault) matches(key string) bool {
	if f.Route == "" || f.Route == "*" {
		return true
	}
	if prefix, ok := strings.CutSuffix(f.Route, "*"); ok {
		return strings.HasPrefix(key, prefix)
	}
	return f.Route == key
}

func (f *Fault) asError() error {
	msg := f.Message
	if msg == "" {
		msg = defaultFaultMessage(f.Status)
	}
	e := &apiError{status: f.Status, message: msg}
	if f.Status == http.StatusTooManyRequests {
		e.retryAfter = f.RetryAfter
		if e.retryAfter <= 0 {
			e.retryAfter = time.Second
		}
	}
	return e
}

func defaultFaultMessage(status int) string {
	switch status {
	case http.StatusTooManyRequests:
		return "Too Many Requests: rate limit exceeded, retry later"
	case http.StatusInternalServerError:
		return "G8Error: injected failure"
	case http.StatusBadGateway:
		return "Bad Gateway"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableError: location temporarily unavailable"
	case http.StatusGatewayTimeout:
		return "Gateway Timeout"
	}
	return fmt.Sprintf("injected failure (%d)", status)
}

// Faults holds the injected faults: rules that fire by chance, and per-route scripts that
// fire in order ("fail, fail, succeed").
type Faults struct {
	mu      sync.Mutex
	rng     *mrand.Rand
	rngMu   *sync.Mutex // the simulator's lock guards rng
	rules   []*Fault
	scripts map[string][]*Fault
	down    map[string]bool
}

func newFaults(rng *mrand.Rand, rngMu *sync.Mutex) *Faults {
	return &Faults{rng: rng, rngMu: rngMu, scripts: map[string][]*Fault{}}
}

// Add installs rules; they stay until Reset.
func (f *Faults) Add(rules ...Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range rules {
		r := rules[i]
		f.rules = append(f.rules, &r)
	}
}

// Script queues outcomes for one route key: each matching call takes the next step; a zero
// Fault step lets that call through. Scripts run before rules.
func (f *Faults) Script(routeKey string, steps ...Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range steps {
		s := steps[i]
		s.Route = routeKey
		f.scripts[routeKey] = append(f.scripts[routeKey], &s)
	}
}

// Reset removes every rule and script.
func (f *Faults) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules, f.scripts = nil, map[string][]*Fault{}
}

// pick returns the fault for this call, or nil.
func (f *Faults) pick(key string) *Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	if steps := f.scripts[key]; len(steps) > 0 {
		step := steps[0]
		f.scripts[key] = steps[1:]
		if *step == (Fault{Route: key}) {
			return nil
		}
		return step
	}
	for _, r := range f.rules {
		if !r.matches(key) || r.Count < 0 {
			continue
		}
		if r.Rate > 0 && r.Rate < 1 {
			f.rngMu.Lock()
			hit := f.rng.Float64() < r.Rate
			f.rngMu.Unlock()
			if !hit {
				continue
			}
		}
		if r.Count > 0 {
			r.Count--
			if r.Count == 0 {
				r.Count = -1 // spent
			}
		}
		return r
	}
	return nil
}
