package vco

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// Options tune a client. The zero value is sensible for production.
type Options struct {
	// HTTPClient carries the requests; its own Timeout should be zero (Timeout below governs).
	HTTPClient *http.Client
	// Timeout bounds one attempt of one call. The API blocks until work is done, so the
	// default is long: 10 minutes.
	Timeout time.Duration
	// MaxAttempts bounds retries of transient failures (default 5; 1 disables retries).
	MaxAttempts int
	// BaseBackoff and MaxBackoff shape the exponential backoff (defaults 1 s and 30 s).
	BaseBackoff, MaxBackoff time.Duration
	// MaxConcurrent limits calls in flight per credential (default 8), so one cluster's
	// burst cannot exhaust the platform's rate limit for everyone sharing the credential.
	MaxConcurrent int
	// Registerer receives the per-call metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Logger gets one V(4) line per call: operation, path template, status, duration. It
	// never logs tokens, query strings or bodies.
	Logger logr.Logger
	// Now is the clock used for token expiry; default time.Now.
	Now func() time.Time
	// AllowHTTP permits http:// API and IAM URLs on any host: for a simulator only. Loopback
	// hosts never need it. It is the program's choice (the manager's --vco-allow-http), never
	// a credential's; see endpoint.go for every rule on the URLs.
	AllowHTTP bool
	// AllowedHosts, when not empty, are the only hosts (host or host:port) the credentials'
	// url and iamURL may name; a link-local or metadata address must be listed to be used at
	// all. The client's own transport (HTTPClient nil) also checks the address it connects to.
	AllowedHosts []string
	// Flags name the flags behind AllowHTTP and AllowedHosts in refusals; default ManagerFlags.
	Flags PolicyFlags
}

func (o Options) withDefaults() Options {
	if o.HTTPClient == nil {
		// A policy that does not parse has no transport: New and NewFactory report it.
		if p, err := newPolicy(o); err == nil {
			o.HTTPClient = &http.Client{Transport: guardedTransport(p)}
		} else {
			o.HTTPClient = &http.Client{Transport: http.DefaultTransport}
		}
	}
	// A copy, so the caller's client keeps its own redirect policy.
	hc := *o.HTTPClient
	hc.CheckRedirect = safeRedirect(o.HTTPClient.CheckRedirect)
	o.HTTPClient = &hc
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 5
	}
	if o.BaseBackoff == 0 {
		o.BaseBackoff = time.Second
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.MaxConcurrent == 0 {
		o.MaxConcurrent = 8
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Client is the whitesky.cloud REST client. It implements every area interface in this
// package; callers should depend on the smallest interface they need.
type Client struct {
	base     string
	customer string
	opts     Options
	tokens   *tokenSource
	sem      chan struct{}
	metrics  *metrics
}

// New builds a client for one credential.
func New(creds Credentials, opts Options) (*Client, error) {
	return newClient(creds, opts.withDefaults(), nil)
}

// safeRedirect refuses a redirect to another host or from https to http: the request carries
// the bearer token (and, to the IAM, the client secret in its body).
func safeRedirect(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		first := via[0].URL
		switch {
		case req.URL.Host != first.Host:
			return fmt.Errorf("vco: refusing a redirect from host %s to host %s", first.Host, req.URL.Host)
		case first.Scheme == "https" && req.URL.Scheme != "https":
			return fmt.Errorf("vco: refusing a redirect from https to %s", req.URL.Scheme)
		case len(via) >= 10:
			return errors.New("vco: stopped after 10 redirects")
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
}

func newClient(creds Credentials, opts Options, m *metrics) (*Client, error) {
	if err := creds.Validate(); err != nil {
		return nil, err
	}
	if err := checkEndpoints(creds, opts); err != nil {
		return nil, err
	}
	if len(creds.CABundle) > 0 {
		hc, err := withCABundle(opts.HTTPClient, creds.CABundle)
		if err != nil {
			return nil, fmt.Errorf("vco: invalid credentials: %w", err)
		}
		opts.HTTPClient = hc
	}
	if creds.JWT != "" {
		if _, err := tokenExpiry(creds.JWT); err != nil {
			return nil, fmt.Errorf("vco: invalid credentials: %q: %w", SecretKeyJWT, err)
		}
	}
	if m == nil {
		m = newMetrics(opts.Registerer)
	}
	return &Client{
		base: strings.TrimSuffix(creds.URL, "/"), customer: creds.Customer, opts: opts,
		tokens: newTokenSource(creds, opts.HTTPClient, opts.Now), sem: make(chan struct{}, opts.MaxConcurrent), metrics: m,
	}, nil
}

// Customer is the customer id the client works for.
func (c *Client) Customer() string { return c.customer }

// Factory hands out one client per credential, so that every reconcile using the same
// Secret shares its token, its concurrency limit and its metrics.
type Factory struct {
	opts    Options
	metrics *metrics

	mu      sync.Mutex
	clients map[string]*Client
}

// NewFactory builds a factory; opts apply to every client it makes.
func NewFactory(opts Options) *Factory {
	opts = opts.withDefaults()
	return &Factory{opts: opts, metrics: newMetrics(opts.Registerer), clients: map[string]*Client{}}
}

// Client returns the client for these credentials, creating it on first use.
func (f *Factory) Client(creds Credentials) (*Client, error) {
	h := sha256.New()
	for _, part := range []string{creds.URL, creds.Customer, creds.JWT, creds.ClientID, creds.ClientSecret, creds.IAMURL, string(creds.CABundle)} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	key := hex.EncodeToString(h.Sum(nil))
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.clients[key]; c != nil {
		return c, nil
	}
	c, err := newClient(creds, f.opts, f.metrics)
	if err != nil {
		return nil, err
	}
	f.clients[key] = c
	return c, nil
}

// op is one API operation: its metric name, method and swagger path template. Idempotent
// operations are retried after transient failures; others only after a 429, which the
// server answers before doing any work.
type op struct {
	name       string
	method     string
	path       string
	idempotent bool
}

// operations lists every op the client can call, for the conformance test.
var operations []op

func register(o op) op {
	operations = append(operations, o)
	return o
}

func get(name, path string) op {
	return register(op{name: name, method: http.MethodGet, path: path, idempotent: true})
}
func post(name, path string) op { return register(op{name: name, method: http.MethodPost, path: path}) }
func put(name, path string) op {
	return register(op{name: name, method: http.MethodPut, path: path, idempotent: true})
}
func del(name, path string) op {
	return register(op{name: name, method: http.MethodDelete, path: path, idempotent: true})
}

// postIdempotent is a POST that is safe to repeat (e.g. start a VM).
func postIdempotent(name, path string) op {
	return register(op{name: name, method: http.MethodPost, path: path, idempotent: true})
}

// expand fills a path template: {customer_id} with the client's customer, the other
// parameters in order.
func (c *Client) expand(tmpl string, args []string) (string, error) {
	var b strings.Builder
	i := 0
	for {
		open := strings.IndexByte(tmpl, '{')
		if open < 0 {
			b.WriteString(tmpl)
			break
		}
		end := strings.IndexByte(tmpl[open:], '}') + open
		b.WriteString(tmpl[:open])
		name := tmpl[open+1 : end]
		val := c.customer
		if name != "customer_id" {
			if i >= len(args) {
				return "", fmt.Errorf("vco: internal: missing path argument %s for %s", name, tmpl)
			}
			val = args[i]
			i++
		}
		if val == "" {
			return "", fmt.Errorf("vco: %s must not be empty: %w", name, ErrBadRequest)
		}
		b.WriteString(url.PathEscape(val))
		tmpl = tmpl[end+1:]
	}
	return b.String(), nil
}

// call is the arguments of one request.
type call struct {
	path  []string
	query url.Values
	body  any
}

const maxResponse = 64 << 20

// do runs one operation with auth, the concurrency limit, retries and metrics, and decodes
// a 2xx body into out (when out is not nil and the body is not empty).
func (c *Client) do(ctx context.Context, o op, in call, out any) error {
	path, err := c.expand(o.path, in.path)
	if err != nil {
		return err
	}
	target := c.base + path
	if len(in.query) > 0 {
		target += "?" + in.query.Encode()
	}
	var body []byte
	if in.body != nil {
		if body, err = json.Marshal(in.body); err != nil {
			return fmt.Errorf("vco: %s: encoding body: %w", o.name, err)
		}
	}
	renewed := false
	for attempt := 1; ; attempt++ {
		status, respBody, retryAfter, err := c.attempt(ctx, o, target, body)
		if status == http.StatusUnauthorized && !renewed && c.tokens.canRenew() {
			renewed = true // the token was revoked or expired early: renew once, at once
			attempt--
			continue
		}
		if err == nil {
			if out == nil || len(bytes.TrimSpace(respBody)) == 0 {
				return nil
			}
			if err := json.Unmarshal(respBody, out); err != nil {
				return fmt.Errorf("vco: %s (%s %s): decoding the answer: %w", o.name, o.method, o.path, err)
			}
			return nil
		}
		retry := errors.Is(err, ErrRateLimited) || (o.idempotent && errors.Is(err, ErrUnavailable))
		if !retry || attempt >= c.opts.MaxAttempts || ctx.Err() != nil {
			return err
		}
		if !sleep(ctx, c.backoff(attempt, retryAfter)) {
			return err
		}
	}
}

func (c *Client) attempt(ctx context.Context, o op, target string, body []byte) (status int, respBody []byte, retryAfter time.Duration, err error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return 0, nil, 0, &unavailableError{op: o, err: ctx.Err()}
	}
	defer func() { <-c.sem }()
	start := time.Now()
	defer func() {
		c.metrics.observe(o.name, status, err, time.Since(start))
		c.opts.Logger.V(4).Info("whitesky.cloud call", "operation", o.name, "method", o.method, "path", o.path,
			"status", status, "duration", time.Since(start).Round(time.Millisecond).String())
	}()
	token, err := c.tokens.get(ctx)
	if err != nil {
		return 0, nil, 0, err
	}
	actx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(actx, o.method, target, rd)
	if err != nil {
		return 0, nil, 0, fmt.Errorf("vco: %s: building request: %w", o.name, stripURL(err))
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if errors.Is(err, errRefusedAddress) {
		return 0, nil, 0, fmt.Errorf("vco: %s (%s %s): %w", o.name, o.method, o.path, stripURL(err)) // no retry can help
	}
	if terr := untrustedCertificate(err); terr != nil {
		return 0, nil, 0, fmt.Errorf("vco: %s (%s %s): %w", o.name, o.method, o.path, terr) // no retry can help
	}
	if err != nil {
		return 0, nil, 0, &unavailableError{op: o, err: stripURL(err)}
	}
	defer resp.Body.Close()
	limit := int64(maxResponse)
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		limit = maxErrorBody + 1 // enough to tell an API error from anything else
	}
	respBody, err = io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return resp.StatusCode, nil, 0, &unavailableError{op: o, err: stripURL(err)}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp.StatusCode, respBody, 0, nil
	}
	if resp.StatusCode == http.StatusUnauthorized {
		c.tokens.invalidate(token)
	}
	retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), c.opts.Now())
	return resp.StatusCode, nil, retryAfter, newAPIError(o, resp.StatusCode, respBody, retryAfter).scrub(c.tokens.secrets(token)...)
}

// backoff is exponential with full jitter, at least the server's Retry-After.
func (c *Client) backoff(attempt int, retryAfter time.Duration) time.Duration {
	d := c.opts.BaseBackoff << min(attempt-1, 20)
	if d > c.opts.MaxBackoff || d <= 0 {
		d = c.opts.MaxBackoff
	}
	d = d/2 + rand.N(d/2+1)
	if retryAfter > d {
		d = min(retryAfter, 5*time.Minute)
	}
	return d
}

func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// query builds query strings the way the API wants them: booleans as true/false, arrays as
// CSV, optional arguments left out when unset.
type query url.Values

func (q query) str(k, v string) query {
	if v != "" {
		url.Values(q).Set(k, v)
	}
	return q
}

func (q query) int(k string, v int) query {
	if v != 0 {
		url.Values(q).Set(k, strconv.Itoa(v))
	}
	return q
}

func (q query) must(k string, v int) query {
	url.Values(q).Set(k, strconv.Itoa(v))
	return q
}

func (q query) bool(k string, v bool) query {
	url.Values(q).Set(k, strconv.FormatBool(v))
	return q
}

func (q query) optBool(k string, v *bool) query {
	if v != nil {
		q.bool(k, *v)
	}
	return q
}

func (q query) ints(k string, vs []int) query {
	if len(vs) > 0 {
		parts := make([]string, len(vs))
		for i, v := range vs {
			parts[i] = strconv.Itoa(v)
		}
		url.Values(q).Set(k, strings.Join(parts, ","))
	}
	return q
}

func (q query) values() url.Values { return url.Values(q) }

func args(vs ...string) []string { return vs }

func itoa(v int) string { return strconv.Itoa(v) }

// resultList is the {"result": [...]} envelope.
type resultList[T any] struct {
	Result []T `json:"result"`
}
