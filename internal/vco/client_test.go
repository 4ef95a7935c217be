package vco_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

const vmsRoute = "POST /customers/{customer_id}/cloudspaces/{cloudspace_id}/vms"
const csRoute = "GET /customers/{customer_id}/cloudspaces/{cloudspace_id}"

// TestFaultClasses runs each injected fault against an idempotent read and a create, and
// checks the typed error, whether the client retried, and that the API's message survives.
func TestFaultClasses(t *testing.T) {
	cases := []struct {
		name      string
		route     string
		faults    []vcosim.Fault
		want      error // nil: the call succeeds after retries
		attempts  int   // requests the simulator saw for the route
		inMessage string
	}{
		{name: "503 on a read is retried", route: csRoute, faults: []vcosim.Fault{{Status: 503}, {Status: 503}}, attempts: 3},
		{name: "502 and 504 on a read are retried", route: csRoute, faults: []vcosim.Fault{{Status: 502}, {Status: 504}}, attempts: 3},
		{name: "429 on a create is retried, honouring Retry-After", route: vmsRoute, faults: []vcosim.Fault{{Status: 429, RetryAfter: time.Millisecond}}, attempts: 2},
		{name: "503 on a create is not retried", route: vmsRoute, faults: []vcosim.Fault{{Status: 503}}, want: vco.ErrUnavailable, attempts: 1, inMessage: "ServiceUnavailableError"},
		{name: "500 keeps the API message", route: csRoute, faults: []vcosim.Fault{{Status: 500, Message: "G8Error: node rmd-07 unreachable"}}, want: vco.ErrServer, attempts: 1, inMessage: "node rmd-07 unreachable"},
		{name: "persistent 429 gives up", route: csRoute, faults: []vcosim.Fault{{Status: 429}, {Status: 429}, {Status: 429}, {Status: 429}}, want: vco.ErrRateLimited, attempts: 3},
		{name: "timeout on a read is retried", route: csRoute, faults: []vcosim.Fault{{Timeout: true}}, attempts: 2},
		{name: "latency alone is harmless", route: csRoute, faults: []vcosim.Fault{{Latency: 20 * time.Millisecond}}, attempts: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, vcosim.Options{})
			cs := e.cloudspace("cs", loc)
			img := e.image(loc)
			c := e.client(vcosim.SeedClusterPrinc, vco.Options{MaxAttempts: 3, Timeout: 200 * time.Millisecond, BaseBackoff: time.Millisecond})
			e.sim.Faults().Script(tc.route, tc.faults...)
			e.sim.ResetRequests()
			var err error
			if tc.route == vmsRoute {
				_, err = c.CreateVM(e.ctx, cs.ID, vco.CreateVMRequest{Name: "w", VCPUs: 1, MemoryMiB: 1024, ImageID: img})
			} else {
				_, err = c.GetCloudspace(e.ctx, cs.ID)
			}
			if tc.want == nil && err != nil {
				t.Fatalf("want success, got %v", err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("want %v, got %v", tc.want, err)
			}
			if tc.inMessage != "" && !strings.Contains(err.Error(), tc.inMessage) {
				t.Fatalf("message lost: %v", err)
			}
			n := 0
			for _, r := range e.sim.Requests() {
				if r.Method+" "+strings.TrimPrefix(r.Route, "/api/1") == tc.route {
					n++
				}
			}
			if n != tc.attempts {
				t.Fatalf("simulator saw %d requests, want %d", n, tc.attempts)
			}
		})
	}
}

// TestEnsureVMAfterUnknownOutcome: the create times out but the platform finishes it; the
// retry must find the VM by name instead of making a second one.
func TestEnsureVMAfterUnknownOutcome(t *testing.T) {
	for _, f := range []vcosim.Fault{{Timeout: true, Apply: true}, {Status: 500, Apply: true}, {Status: 504, Apply: true}} {
		e := newEnv(t, vcosim.Options{})
		cs := e.cloudspace("cs", loc)
		c := e.client(vcosim.SeedClusterPrinc, vco.Options{Timeout: 300 * time.Millisecond})
		e.sim.Faults().Script(vmsRoute, f)
		vm, created, err := c.EnsureVM(e.ctx, cs.ID, vco.CreateVMRequest{Name: "md-0", VCPUs: 1, MemoryMiB: 1024, ImageID: e.image(loc)})
		if err != nil || !created || vm.Name != "md-0" {
			t.Fatalf("fault %+v: vm %+v created %v err %v", f, vm, created, err)
		}
		again, created, err := c.EnsureVM(e.ctx, cs.ID, vco.CreateVMRequest{Name: "md-0", VCPUs: 1, MemoryMiB: 1024, ImageID: e.image(loc)})
		if err != nil || created || again.ID != vm.ID {
			t.Fatalf("second ensure: %+v %v %v", again, created, err)
		}
		if n := len(e.sim.Snapshot().VMs); n != 1 {
			t.Fatalf("fault %+v: %d VMs, want 1", f, n)
		}
	}
}

func TestEnsureCloudspaceRefusesPartialList(t *testing.T) {
	e := newEnv(t, vcosim.Options{})
	e.cloudspace("cs", loc)
	e.sim.Faults().LocationDown(loc, true)
	_, _, err := e.cluster.EnsureCloudspace(e.ctx, vco.CreateCloudspaceRequest{Name: "cs", Location: loc})
	var partial *vco.PartialListError
	if !errors.As(err, &partial) || !errors.Is(err, vco.ErrUnavailable) {
		t.Fatalf("want a partial-list error, got %v", err)
	}
	if n := len(e.sim.Snapshot().Cloudspaces); n != 1 {
		t.Fatalf("%d cloudspaces: a partial list led to a duplicate", n)
	}
}

// TestGrants checks the platform's real 403s for scoped credentials.
func TestGrants(t *testing.T) {
	e := newEnv(t, vcosim.Options{})
	cs := e.cloudspace("cs", loc)
	other := e.cloudspace("other", loc)
	vm := e.vm(cs.ID, "vm", loc)
	disk, err := e.cluster.CreateDisk(e.ctx, loc, vco.CreateDiskRequest{Name: "d", SizeGiB: 1})
	e.must(err)
	csOnly := e.scoped("cs-only", vcosim.Grant{ResourceType: "cloudspace", ResourceID: cs.ID})
	locOnly := e.scoped("loc-only", vcosim.Grant{ResourceType: "location", ResourceID: loc})
	readOnly := e.scoped("read-only", vcosim.Grant{ResourceType: "customer", ResourceID: vcosim.SeedCustomer, Permissions: []string{vcosim.PermRead}})
	vmOnly := e.scoped("vm-only", vcosim.Grant{ResourceType: "vm", ResourceID: cs.ID + ":" + itoa(vm.ID)})
	crt, key := selfSigned(t, "x.acme.example")
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"cloudspace credential cannot create disks", func() error {
			_, err := csOnly.CreateDisk(e.ctx, loc, vco.CreateDiskRequest{Name: "x", SizeGiB: 1})
			return err
		}, vco.ErrForbidden},
		{"cloudspace credential can attach a disk", func() error { return csOnly.AttachDisk(e.ctx, cs.ID, vm.ID, disk) }, nil},
		{"cloudspace credential cannot see another cloudspace", func() error { _, err := csOnly.GetCloudspace(e.ctx, other.ID); return err }, vco.ErrForbidden},
		{"cloudspace credential lists only its cloudspace", func() error {
			l, err := csOnly.ListCloudspaces(e.ctx, vco.ListCloudspacesOptions{})
			if err == nil && len(l) != 1 {
				return errors.New("saw other cloudspaces")
			}
			return err
		}, nil},
		{"location credential can create disks", func() error {
			_, err := locOnly.CreateDisk(e.ctx, loc, vco.CreateDiskRequest{Name: "y", SizeGiB: 1})
			return err
		}, nil},
		{"location credential cannot use another location", func() error { _, err := locOnly.ListImages(e.ctx, loc2); return err }, vco.ErrForbidden},
		{"read-only credential cannot delete", func() error { return readOnly.DeleteCloudspace(e.ctx, other.ID, true) }, vco.ErrForbidden},
		{"vm credential can stop its VM", func() error { return vmOnly.StopVM(e.ctx, cs.ID, vm.ID, false) }, nil},
		{"vm credential cannot list the cloudspace", func() error { _, err := vmOnly.ListVMs(e.ctx, cs.ID, false); return err }, vco.ErrForbidden},
		{"customer credential cannot publish images", func() error {
			_, err := e.cluster.CreateImage(e.ctx, loc, vco.CreateImageRequest{Name: "i", URL: "https://x/i.qcow2", MemoryMiB: 512, BootDiskGiB: 5, BootType: "bios", OSType: "Linux", OSName: "x"})
			return err
		}, vco.ErrForbidden},
		{"customer credential cannot write the certificate store", func() error { _, err := e.cluster.UploadCertificate(e.ctx, crt, key); return err }, vco.ErrForbidden},
		{"customer credential can read the certificate store", func() error { _, err := e.cluster.ListCertificates(e.ctx); return err }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if (tc.want == nil && err != nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("want %v, got %v", tc.want, err)
			}
		})
	}
}

// TestPlatformBehaviour checks the platform edges from the CAPVCO seed page.
func TestPlatformBehaviour(t *testing.T) {
	e := newEnv(t, vcosim.Options{})
	ctx, c := e.ctx, e.cluster
	cs := e.cloudspace("cs", loc)
	vm := e.vm(cs.ID, "gpu-0", loc)

	if err := c.DeleteCloudspace(ctx, cs.ID, true); !errors.Is(err, vco.ErrConflict) || !strings.Contains(err.Error(), "virtual machine") {
		t.Fatalf("cloudspace with VMs deleted: %v", err)
	}
	gpu, _, err := c.EnsureAttachedVGPU(ctx, loc, cs.ID, vm.ID, vcosim.SeedStubGPUProfile, "capvco_ns_c1_gpu-0_gpu_0")
	e.must(err)
	if err := c.DeleteVM(ctx, cs.ID, vm.ID, vco.DeleteVMOptions{Permanently: true}); !errors.Is(err, vco.ErrConflict) {
		t.Fatalf("VM with a vGPU deleted without detach_gpu: %v", err)
	}
	e.must(c.DeleteVM(ctx, cs.ID, vm.ID, vco.DeleteVMOptions{Permanently: true, DetachGPU: true}))
	if !billed(e, "vgpu", gpu.ID) {
		t.Fatal("a detached reservation must stay billed")
	}
	// A soft delete through the API is still billed; only a permanent release stops it.
	e.raw("DELETE", "/api/1/customers/acme/locations/"+loc+"/vgpus/"+gpu.ID, e.token(vcosim.SeedClusterPrinc), nil)
	if !billed(e, "vgpu", gpu.ID) {
		t.Fatal("a soft-deleted reservation must stay billed")
	}
	e.must(c.ReleaseVGPU(ctx, loc, gpu.ID))
	if billed(e, "vgpu", gpu.ID) {
		t.Fatal("a permanently released reservation is still billed")
	}

	// Renamed in the portal, a reservation is no longer found by its CAPVCO name.
	ids, err := e.sim.ReserveVGPUs(vcosim.SeedCustomer, loc, vcosim.SeedStubGPUProfile, "capvco_ns_c1_m_gpu_0")
	e.must(err)
	e.must(e.sim.RenameVGPU(ids[0], "my-gpu"))
	if found, err := c.FindVGPUs(ctx, loc, "capvco_ns_c1_m_gpu_0"); err != nil || len(found) != 0 {
		t.Fatalf("renamed reservation still found: %v %v", found, err)
	}

	// DNS: TTL is 3600 whatever happens, and A records point at the cloudspace IP.
	_, err = c.EnsureCloudspaceDNSRecord(ctx, cs.ID, vco.DNSRecordSpec{Domain: "api.acme.example", Value: "10.9.9.9"})
	e.must(err)
	recs := e.sim.Snapshot().DNSRecords
	if len(recs) != 1 || recs[0].TTL != vco.DNSTTL || recs[0].Value != cs.ExternalNetworkIP {
		t.Fatalf("dns records %+v", recs)
	}

	// Images are per location.
	if _, err := c.GetImage(ctx, loc2, e.image(loc)); !errors.Is(err, vco.ErrNotFound) {
		t.Fatalf("image of %s found in %s: %v", loc, loc2, err)
	}
	// Soft delete goes to the recycle bin; the cloudspace is empty now.
	e.must(c.DeleteCloudspace(ctx, cs.ID, false))
	all, err := c.ListCloudspaces(ctx, vco.ListCloudspacesOptions{IncludeDeleted: true})
	e.must(err)
	if len(all) != 1 || all[0].Status != "DELETED" {
		t.Fatalf("soft-deleted cloudspace: %+v", all)
	}
}

func billed(e *env, kind, id string) bool {
	for _, b := range e.sim.Billed() {
		if b.Kind == kind && b.ID == id {
			return true
		}
	}
	return false
}

func TestSlowDNSWritesBlock(t *testing.T) {
	e := newEnv(t, vcosim.Options{TimeScale: 0.002}) // 30 s -> 60 ms
	cs := e.cloudspace("cs", loc)
	start := time.Now()
	e.must(e.cluster.CreateCloudspaceDNSRecord(e.ctx, cs.ID, vco.DNSRecordSpec{Domain: "a.acme.example"}))
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Fatalf("DNS write returned after %v; the platform blocks ~30 s (scaled: 60 ms)", took)
	}
}

func TestLinkDeletesFail(t *testing.T) {
	e := newEnv(t, vcosim.Options{LinkDeleteFailureRate: 1, RandSeed: 7})
	a, b := e.cloudspace("a", loc), e.cloudspace("b", loc2)
	e.must(e.cluster.ConnectCloudspaces(e.ctx, a.ID, b.ID, a.ExternalNetworkIP, b.ExternalNetworkIP))
	err := e.cluster.DisconnectCloudspaces(e.ctx, a.ID, b.ID, a.ExternalNetworkIP, b.ExternalNetworkIP)
	if !errors.Is(err, vco.ErrBadRequest) && !errors.Is(err, vco.ErrServer) {
		t.Fatalf("want a 400 or 500, got %v", err)
	}
	if err := e.cluster.ConnectCloudspaces(e.ctx, a.ID, b.ID, a.ExternalNetworkIP, b.ExternalNetworkIP); !errors.Is(err, vco.ErrConflict) {
		t.Fatalf("second connect: %v", err)
	}
	// The cloudspace delete cascade removes the link regardless.
	e.must(e.cluster.DeleteCloudspace(e.ctx, a.ID, true))
	if l := e.sim.Snapshot().Links; len(l) != 0 {
		t.Fatalf("links left: %+v", l)
	}
}

func TestTokenRefresh(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	e := newEnv(t, vcosim.Options{TokenTTL: time.Hour, Now: func() time.Time { return now }})
	c := e.client(vcosim.SeedClusterPrinc, vco.Options{Now: clock})
	_, err := c.Me(e.ctx)
	e.must(err)
	now = now.Add(59*time.Minute + 30*time.Second) // inside the refresh window
	_, err = c.Me(e.ctx)
	e.must(err)
	refreshed := 0
	for _, r := range e.sim.Requests() {
		if strings.HasSuffix(r.Route, "/jwt/refresh") {
			refreshed++
		}
	}
	if refreshed != 1 {
		t.Fatalf("refreshed %d times, want 1", refreshed)
	}

	// An expired JWT without an IAM URL cannot be renewed: a clear error.
	tok := e.token(vcosim.SeedClusterPrinc)
	stale, err := vco.New(vco.Credentials{URL: e.sim.APIURL(), Customer: vcosim.SeedCustomer, JWT: tok}, e.options(vco.Options{Now: func() time.Time { return now.Add(2 * time.Hour) }}))
	e.must(err)
	_, err = stale.Me(e.ctx)
	if !errors.Is(err, vco.ErrUnauthorized) || !strings.Contains(err.Error(), "iamURL") {
		t.Fatalf("want an actionable unauthorized error, got %v", err)
	}
	if strings.Contains(err.Error(), tok) {
		t.Fatal("the token leaked into an error")
	}
}

func TestClientCredentials(t *testing.T) {
	e := newEnv(t, vcosim.Options{})
	id, sec, err := e.sim.ClientSecret(vcosim.SeedClusterPrinc)
	e.must(err)
	c, err := vco.New(vco.Credentials{URL: e.sim.APIURL(), Customer: vcosim.SeedCustomer, ClientID: id, ClientSecret: sec, IAMURL: e.sim.IAMURL()}, e.options(vco.Options{}))
	e.must(err)
	me, err := c.Me(e.ctx)
	e.must(err)
	if me.Username != vcosim.SeedClusterPrinc {
		t.Fatalf("me %+v", me)
	}
	bad, err := vco.New(vco.Credentials{URL: e.sim.APIURL(), Customer: vcosim.SeedCustomer, ClientID: id, ClientSecret: "wrong-secret-value", IAMURL: e.sim.IAMURL()}, e.options(vco.Options{}))
	e.must(err)
	_, err = bad.Me(e.ctx)
	if !errors.Is(err, vco.ErrUnauthorized) || strings.Contains(err.Error(), "wrong-secret-value") {
		t.Fatalf("want unauthorized without the secret, got %v", err)
	}
}

func TestCredentials(t *testing.T) {
	cases := []struct {
		name string
		data map[string]string
		ok   bool
		want string
	}{
		{"jwt", map[string]string{"url": "https://try.whitesky.cloud/api/1", "customer": "acme", "jwt": "a.b.c"}, true, ""},
		{"client credentials", map[string]string{"url": "https://x/api/1", "customer": "acme", "clientID": "id", "clientSecret": "s", "iamURL": "https://iam"}, true, ""},
		{"no auth", map[string]string{"url": "https://x/api/1", "customer": "acme"}, false, `set "jwt"`},
		{"client id without IAM", map[string]string{"url": "https://x/api/1", "customer": "acme", "clientID": "id", "clientSecret": "s"}, false, `"iamURL"`},
		{"bad url", map[string]string{"url": "try.whitesky.cloud", "customer": "acme", "jwt": "x"}, false, `"url"`},
		{"no customer", map[string]string{"url": "https://x/api/1", "jwt": "x"}, false, `"customer"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := map[string][]byte{}
			for k, v := range tc.data {
				data[k] = []byte(v)
			}
			creds, err := vco.CredentialsFromSecret(data)
			if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("err %v", err)
			}
			if s := creds.String() + creds.GoString(); strings.Contains(s, "clientSecret") || (tc.data["clientSecret"] != "" && strings.Contains(s, "="+tc.data["clientSecret"])) {
				t.Fatalf("String shows a secret: %s", s)
			}
		})
	}
}

func TestNoSecretsInErrors(t *testing.T) {
	e := newEnv(t, vcosim.Options{})
	cs := e.cloudspace("cs", loc)
	e.sim.Faults().Script(vmsRoute, vcosim.Fault{Timeout: true})
	c := e.client(vcosim.SeedClusterPrinc, vco.Options{Timeout: 50 * time.Millisecond})
	_, err := c.CreateVM(e.ctx, cs.ID, vco.CreateVMRequest{Name: "w", VCPUs: 1, MemoryMiB: 512, ImageID: e.image(loc), UserData: "join-token: abcdef.0123456789abcdef"})
	if err == nil || !errors.Is(err, vco.ErrUnavailable) {
		t.Fatalf("want an unknown outcome, got %v", err)
	}
	if strings.Contains(err.Error(), "0123456789abcdef") || strings.Contains(err.Error(), "user_data") {
		t.Fatalf("user_data leaked: %v", err)
	}
}

func TestMetricsAndConcurrencyLimit(t *testing.T) {
	e := newEnv(t, vcosim.Options{})
	e.sim.Faults().Add(vcosim.Fault{Route: "GET /me", Latency: 20 * time.Millisecond})
	c := e.client(vcosim.SeedClusterPrinc, vco.Options{MaxConcurrent: 2})
	start := time.Now()
	errs := make(chan error, 6)
	for range 6 {
		go func() { _, err := c.Me(context.Background()); errs <- err }()
	}
	for range 6 {
		e.must(<-errs)
	}
	if took := time.Since(start); took < 55*time.Millisecond {
		t.Fatalf("6 calls of 20 ms with 2 in flight took %v; the limit is not applied", took)
	}
	if n := counter(t, e, "Me", "2xx"); n < 6 {
		t.Fatalf("vco_client_requests_total{operation=Me,code=2xx} = %v", n)
	}
}

func counter(t *testing.T, e *env, op, code string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	e.must(err)
	for _, mf := range mfs {
		if mf.GetName() != "vco_client_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["operation"] == op && labels["code"] == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
