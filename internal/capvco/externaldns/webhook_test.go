package externaldns

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/internal/vco/vcotest"
)

// webhook is the provider served over the protocol on a simulated platform with one cloudspace.
type webhook struct {
	t          *testing.T
	sim        *vcosim.Server
	api        *vco.Client
	url        string
	cloudspace string
	publicIP   string
}

func newWebhook(t *testing.T) *webhook {
	t.Helper()
	sim := vcosim.NewTestServer(t, vcosim.Options{})
	api := vcotest.Client(t, sim, vcosim.SeedClusterPrinc)
	ctx := context.Background()
	id, err := api.CreateCloudspace(ctx, vco.CreateCloudspaceRequest{Name: "dns-test", Location: vcosim.SeedLocation})
	if err != nil {
		t.Fatal(err)
	}
	var cs vco.Cloudspace
	for deadline := time.Now().Add(time.Minute); cs.ExternalNetworkIP == ""; time.Sleep(10 * time.Millisecond) {
		if cs, err = api.GetCloudspace(ctx, id); err != nil || time.Now().After(deadline) {
			t.Fatalf("cloudspace %s has no public IP: %+v, %v", id, cs, err)
		}
	}
	p := &Provider{API: api, Cloudspaces: []string{id}, Filter: DomainFilter{Include: []string{"apps.example.com"}}, Log: testr.New(t)}
	srv := httptest.NewServer(Handler(p))
	t.Cleanup(srv.Close)
	return &webhook{t: t, sim: sim, api: api, url: srv.URL, cloudspace: id, publicIP: cs.ExternalNetworkIP}
}

func (w *webhook) call(method, path string, body any) (int, []byte) {
	w.t.Helper()
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			w.t.Fatal(err)
		}
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, w.url+path, in)
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Accept", MediaType)
	req.Header.Set("Content-Type", MediaType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// records is what GET /records answers, as "name type target" lines.
func (w *webhook) records() []string {
	w.t.Helper()
	status, body := w.call(http.MethodGet, "/records", nil)
	if status != http.StatusOK {
		w.t.Fatalf("GET /records: %d %s", status, body)
	}
	var eps []Endpoint
	if err := json.Unmarshal(body, &eps); err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, ep := range eps {
		for _, target := range ep.Targets {
			out = append(out, ep.DNSName+" "+ep.RecordType+" "+target)
		}
	}
	slices.Sort(out)
	return out
}

// platform is every DNS record the simulator holds for the customer, as "name type" lines.
func (w *webhook) platform() []string {
	w.t.Helper()
	recs, err := w.api.ListCustomerDNSRecords(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, r.Domain+" "+r.Type)
	}
	slices.Sort(out)
	return out
}

// TestWebhookOnTheSimulator drives the webhook protocol as external-dns does, against the
// simulator: negotiation, a change set creating an A record on the cloudspace with its TXT
// owner and a CNAME, an update, a fault in the middle of a change set (a 500 naming what is not
// done) that the same change set sent again completes, and a delete that removes the records
// and their owners.
func TestWebhookOnTheSimulator(t *testing.T) {
	w := newWebhook(t)
	status, body := w.call(http.MethodGet, "/", nil)
	if status != http.StatusOK || !strings.Contains(string(body), "apps.example.com") {
		t.Fatalf("negotiation: %d %s", status, body)
	}

	owner := func(name string) *Endpoint {
		return &Endpoint{DNSName: "a-" + name, RecordType: "TXT", Targets: []string{`"heritage=external-dns,external-dns/owner=test"`}}
	}
	web := &Endpoint{DNSName: "web.apps.example.com", RecordType: "A", Targets: []string{w.publicIP}}
	alias := &Endpoint{DNSName: "www.apps.example.com", RecordType: "CNAME", Targets: []string{"web.apps.example.com"}}
	create := Changes{Create: []*Endpoint{web, owner(web.DNSName), alias, owner(alias.DNSName)}}
	if status, body := w.call(http.MethodPost, "/records", create); status != http.StatusNoContent {
		t.Fatalf("create: %d %s", status, body)
	}
	want := []string{"a-web.apps.example.com TXT " + owner("").Targets[0], "a-www.apps.example.com TXT " + owner("").Targets[0],
		"web.apps.example.com A " + w.publicIP, "www.apps.example.com CNAME web.apps.example.com"}
	slices.Sort(want)
	if got := w.records(); !slices.Equal(got, want) {
		t.Fatalf("records after create:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Adjusted endpoints carry the platform's fixed TTL, so external-dns plans no change for it.
	status, body = w.call(http.MethodPost, "/adjustendpoints", []*Endpoint{{DNSName: web.DNSName, RecordType: "A", Targets: web.Targets, RecordTTL: 60}})
	var adjusted []Endpoint
	if err := json.Unmarshal(body, &adjusted); status != http.StatusOK || err != nil || len(adjusted) != 1 || adjusted[0].RecordTTL != vco.DNSTTL {
		t.Fatalf("adjustendpoints: %d %s (%v)", status, body, err)
	}

	// The CNAME moves to another target; the platform fails the first create, so the change
	// set stops with the old record in place and says so. Sent again, it completes.
	moved := &Endpoint{DNSName: alias.DNSName, RecordType: "CNAME", Targets: []string{"other.example.net"}}
	update := Changes{UpdateOld: []*Endpoint{alias}, UpdateNew: []*Endpoint{moved}}
	w.sim.Faults().Script("POST /alpha/customers/{customer_id}/dns-records", vcosim.Fault{Status: http.StatusInternalServerError})
	status, body = w.call(http.MethodPost, "/records", update)
	if status != http.StatusInternalServerError || !strings.Contains(string(body), "change set not complete") || !strings.Contains(string(body), "failed") {
		t.Fatalf("update under a fault: %d %s", status, body)
	}
	if got := w.records(); !slices.Contains(got, "www.apps.example.com CNAME web.apps.example.com") {
		t.Fatalf("the old CNAME is gone after a failed update: %v", got)
	}
	if status, body := w.call(http.MethodPost, "/records", update); status != http.StatusNoContent {
		t.Fatalf("update again: %d %s", status, body)
	}
	if got := w.records(); !slices.Contains(got, "www.apps.example.com CNAME other.example.net") || slices.Contains(got, "www.apps.example.com CNAME web.apps.example.com") {
		t.Fatalf("records after the update: %v", got)
	}

	del := Changes{Delete: []*Endpoint{web, owner(web.DNSName), moved, owner(moved.DNSName)}}
	if status, body := w.call(http.MethodPost, "/records", del); status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", status, body)
	}
	if got := w.records(); len(got) != 0 {
		t.Fatalf("records after delete: %v", got)
	}
	if got := w.platform(); len(got) != 0 {
		t.Fatalf("the platform still holds %v", got)
	}
}
