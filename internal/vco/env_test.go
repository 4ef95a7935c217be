package vco_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/internal/vco/vcospec"
	"github.com/capx-io/capx/internal/vco/vcotest"
)

const (
	loc  = vcosim.SeedLocation
	loc2 = vcosim.SeedLocation2
)

// env is a simulator with clients for the seeded credentials, every request recorded.
type env struct {
	t        testing.TB
	sim      *vcosim.Server
	rec      *vcospec.Recorder
	reg      *prometheus.Registry
	cluster  *vco.Client // the per-cluster service credential (customer grant, not admin)
	operator *vco.Client // customer admin + VCO operator
	ctx      context.Context
}

func newEnv(t testing.TB, opts vcosim.Options) *env {
	t.Helper()
	s := vcosim.NewTestServer(t, opts)
	e := &env{t: t, sim: s, rec: &vcospec.Recorder{Next: http.DefaultTransport}, reg: prometheus.NewRegistry(), ctx: context.Background()}
	e.cluster = e.client(vcosim.SeedClusterPrinc, vco.Options{})
	e.operator = e.client(vcosim.SeedOperatorPrinc, vco.Options{})
	return e
}

// testOptions keep retries fast.
func (e *env) options(o vco.Options) vco.Options {
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Transport: e.rec}
	}
	if o.BaseBackoff == 0 {
		o.BaseBackoff = time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 10 * time.Millisecond
	}
	if o.Registerer == nil {
		o.Registerer = e.reg
	}
	return o
}

func (e *env) token(principal string) string {
	e.t.Helper()
	tok, err := e.sim.Token(principal, 0)
	if err != nil {
		e.t.Fatalf("token: %v", err)
	}
	return tok
}

func (e *env) client(principal string, o vco.Options) *vco.Client {
	e.t.Helper()
	c, err := vco.New(vco.Credentials{URL: e.sim.APIURL(), Customer: vcosim.SeedCustomer, JWT: e.token(principal), IAMURL: e.sim.IAMURL()}, e.options(o))
	if err != nil {
		e.t.Fatalf("client: %v", err)
	}
	return c
}

// scoped creates a principal with one grant and returns its client.
func (e *env) scoped(name string, grants ...vcosim.Grant) *vco.Client {
	e.t.Helper()
	if _, err := e.sim.AddPrincipal(vcosim.Principal{Name: name, Customer: vcosim.SeedCustomer, Grants: grants}); err != nil {
		e.t.Fatal(err)
	}
	return e.client(name, vco.Options{})
}

func (e *env) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

// cloudspace creates a public cloudspace and returns it.
func (e *env) cloudspace(name, location string) vco.Cloudspace {
	e.t.Helper()
	cs, _, err := e.cluster.EnsureCloudspace(e.ctx, vco.CreateCloudspaceRequest{Name: name, Location: location})
	e.must(err)
	return cs
}

func (e *env) image(location string) int {
	e.t.Helper()
	img, err := e.cluster.FindImage(e.ctx, location, vcosim.SeedImageName)
	e.must(err)
	return img.ID
}

func (e *env) vm(csID, name, location string) vco.VM {
	e.t.Helper()
	vm, _, err := e.cluster.EnsureVM(e.ctx, csID, vco.CreateVMRequest{Name: name, VCPUs: 2, MemoryMiB: 4096, ImageID: e.image(location)})
	e.must(err)
	return vm
}

// selfSigned makes a certificate and key for a domain.
func selfSigned(t testing.TB, domain string) (certPEM, keyPEM string) {
	t.Helper()
	crt, key := vcotest.SelfSigned(t, domain, domain)
	return string(crt), string(key)
}

// benchHTTP skips the recorder, which would keep every response in memory.
func benchHTTP() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 100
	return &http.Client{Transport: t}
}
