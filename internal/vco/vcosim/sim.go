package vcosim

import (
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Delays are the platform's slow operations. The real API blocks until work is done; the
// simulator blocks for these durations (times Options.TimeScale) before answering.
type Delays struct {
	CloudspaceCreate time.Duration
	VMCreate         time.Duration
	DiskCreate       time.Duration
	DNSWrite         time.Duration // about 30 s on the real platform
	LinkConnect      time.Duration // connected cloudspace: UNKNOWN until this has passed
}

// DefaultDelays are what the real platform takes, roughly.
var DefaultDelays = Delays{
	CloudspaceCreate: 3 * time.Second,
	VMCreate:         2 * time.Second,
	DiskCreate:       time.Second,
	DNSWrite:         30 * time.Second,
	LinkConnect:      10 * time.Second,
}

// DefaultTestTimeScale is the TimeScale used when Options.TimeScale is zero: a 30 s DNS write
// takes 30 ms, so tests see the ordering of slow calls without waiting for them.
const DefaultTestTimeScale = 0.001

// Options configure a simulator. The zero value is a fast, in-memory simulator with the
// default seed, which is what tests want.
type Options struct {
	// Seed is the initial platform: customers, locations, images, GPU profiles and principals.
	// Nil means DefaultSeed(). It is ignored when StateFile already holds a state.
	Seed *Seed
	// StateFile, when set, is loaded at start and rewritten after every change, so the
	// quickstart survives a restart.
	StateFile string
	// TimeScale multiplies Delays; zero means DefaultTestTimeScale; negative means no delay.
	TimeScale float64
	// Delays overrides DefaultDelays field by field (zero fields keep the default).
	Delays Delays
	// LinkDeleteFailureRate is the chance (0..1) that deleting a connected-cloudspace link fails
	// with a 400 or 500 and leaves the link in place, as the real platform's VPN teardown does.
	LinkDeleteFailureRate float64
	// GPUAttachRequiresHalted makes vGPU attach and detach answer 409 while the VM runs. The
	// real rule is unknown; off by default.
	GPUAttachRequiresHalted bool
	// StrictQuery answers 400 for query parameters the operation does not declare. The real
	// API ignores them silently, so this is off by default; turn it on to catch typos such as
	// "permanent=true" in tests.
	StrictQuery bool
	// MaxVMDisks is how many disks (the boot disk included) one VM takes before attach and
	// create-attached answer 400; zero means DefaultMaxVMDisks. The platform's figure is not
	// documented.
	MaxVMDisks int
	// TokenTTL is the lifetime of tokens the simulator issues; default one hour.
	TokenTTL time.Duration
	// RandSeed makes random faults and link-delete failures repeatable; zero picks one.
	RandSeed uint64
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logf receives one line per request (method, route, status, principal), never a token,
	// query string or body. Nil means silent.
	Logf func(format string, args ...any)
	// DNSWriting, when set, is called while a DNS write takes its time, with the simulator's
	// lock released, so a test can change the platform under a write in flight.
	DNSWriting func(domain string)
}

// Sim is the simulator: an http.Handler serving /api/1 (the customer API), /iam (token
// issuance) and /sim/v1 (inspection and fault injection), plus a Go API for tests.
type Sim struct {
	opts   Options
	delays Delays

	mu      sync.Mutex
	st      *state
	key     []byte
	rng     *mrand.Rand
	reqLog  []RequestRecord
	saveErr error

	mux    *http.ServeMux
	routes []*route
	faults *Faults

	vgpuListHook VGPUListHook // SetVGPUListHook; guarded by mu
	diskDevices  DiskDevices  // SetDiskDevices; guarded by mu
	nicDevices   NICDevices   // SetNICDevices; guarded by mu
	vmHost       VMHost       // SetVMHost; guarded by mu
}

// RequestRecord is one served request, for tests that assert what a caller did.
type RequestRecord struct {
	Time      time.Time `json:"time"`
	Method    string    `json:"method"`
	Route     string    `json:"route"` // path template, e.g. /customers/{customer_id}/cloudspaces
	Path      string    `json:"path"`
	Status    int       `json:"status"`
	Principal string    `json:"principal,omitempty"`
}

const maxRequestLog = 100000

// New builds a simulator.
func New(opts Options) (*Sim, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.TimeScale == 0 {
		opts.TimeScale = DefaultTestTimeScale
	}
	if opts.TokenTTL == 0 {
		opts.TokenTTL = time.Hour
	}
	if opts.RandSeed == 0 {
		opts.RandSeed = uint64(time.Now().UnixNano())
	}
	s := &Sim{opts: opts, delays: mergeDelays(opts.Delays), rng: mrand.New(mrand.NewPCG(opts.RandSeed, 0x5eed))}
	s.faults = newFaults(s.rng, &s.mu)
	if opts.StateFile != "" {
		p, err := loadState(opts.StateFile)
		if err != nil {
			return nil, err
		}
		if p != nil {
			s.st, s.key = p.State, p.SigningKey
		}
	}
	if s.st == nil {
		seed := opts.Seed
		if seed == nil {
			d := DefaultSeed()
			seed = &d
		}
		s.st = newState()
		if err := s.st.apply(*seed); err != nil {
			return nil, fmt.Errorf("applying seed: %w", err)
		}
		s.key = make([]byte, 32)
		if _, err := rand.Read(s.key); err != nil {
			return nil, err
		}
		if err := s.persist(); err != nil {
			return nil, err
		}
	}
	s.routes = s.buildRoutes()
	s.mux = http.NewServeMux()
	for _, rt := range s.routes {
		s.mux.HandleFunc(rt.Method+" "+rt.fullPath(), s.serve(rt))
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "The requested URL was not found on the server. If you entered the URL manually please check your spelling and try again."})
	})
	return s, nil
}

func mergeDelays(d Delays) Delays {
	out := DefaultDelays
	for _, f := range []struct{ dst, src *time.Duration }{
		{&out.CloudspaceCreate, &d.CloudspaceCreate}, {&out.VMCreate, &d.VMCreate}, {&out.DiskCreate, &d.DiskCreate},
		{&out.DNSWrite, &d.DNSWrite}, {&out.LinkConnect, &d.LinkConnect},
	} {
		if *f.src != 0 {
			*f.dst = *f.src
		}
	}
	return out
}

// ServeHTTP serves the API.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Faults is the fault injector, shared by every route.
func (s *Sim) Faults() *Faults { return s.faults }

// scaled turns a platform delay into the simulator's delay.
func (s *Sim) scaled(d time.Duration) time.Duration {
	if s.opts.TimeScale < 0 {
		return 0
	}
	return time.Duration(float64(d) * s.opts.TimeScale)
}

// persist rewrites the state file; callers hold s.mu (or own s exclusively).
func (s *Sim) persist() error {
	if s.opts.StateFile == "" {
		return nil
	}
	err := saveState(s.opts.StateFile, s.key, s.st)
	s.saveErr = err
	return err
}

// Close writes the state file one last time.
func (s *Sim) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.persist()
}

// Server is a simulator listening on a TCP address.
type Server struct {
	*Sim
	srv  *http.Server
	ln   net.Listener
	base string
	done chan error

	closeOnce sync.Once
	closeErr  error
}

// Start listens on addr ("127.0.0.1:0" picks a free port) and serves in the background.
// advertise, when set, is the base URL printed for callers (e.g. a Service URL in a pod).
func Start(addr, advertise string, opts Options) (*Server, error) {
	sim, err := New(opts)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	base := strings.TrimSuffix(advertise, "/")
	if base == "" {
		host, port, _ := net.SplitHostPort(ln.Addr().String())
		if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			host = "127.0.0.1"
		}
		base = "http://" + net.JoinHostPort(host, port)
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 30 * time.Second}
	s := &Server{Sim: sim, srv: srv, ln: ln, base: base, done: make(chan error, 1)}
	go func() {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return s, nil
}

// TB is the part of testing.TB that NewTestServer needs; it keeps "testing" out of the binary.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
}

// NewTestServer starts a simulator on a loopback port and stops it when the test ends.
func NewTestServer(t TB, opts Options) *Server {
	t.Helper()
	s, err := Start("127.0.0.1:0", "", opts)
	if err != nil {
		t.Fatalf("starting vcosim: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// URL is the server's base URL, e.g. http://127.0.0.1:41234.
func (s *Server) URL() string { return s.base }

// APIURL is the customer API base, e.g. http://127.0.0.1:41234/api/1.
func (s *Server) APIURL() string { return s.base + apiBase }

// IAMURL is the token service base, e.g. http://127.0.0.1:41234/iam.
func (s *Server) IAMURL() string { return s.base + iamBase }

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops serving (open requests are cut) and writes the state file. It is safe to
// call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		err := s.srv.Close()
		if serr := s.Wait(); err == nil {
			err = serr
		}
		if cerr := s.Sim.Close(); err == nil {
			err = cerr
		}
		s.closeErr = err
	})
	return s.closeErr
}

// Wait blocks until the server stops.
func (s *Server) Wait() error {
	err := <-s.done
	s.done <- err
	return err
}

// Shutdown stops accepting requests and waits for open ones, then writes the state file.
func (s *Server) Shutdown(timeout time.Duration) error {
	ctx, cancel := contextWithTimeout(timeout)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if cerr := s.Sim.Close(); err == nil {
		err = cerr
	}
	return err
}
