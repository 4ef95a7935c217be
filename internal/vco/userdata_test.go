package vco_test

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// bigCloudConfig is shaped like a control plane's bootstrap data: certificates and keys in
// write_files, kubeadm's configuration, commands; about size bytes.
func bigCloudConfig(header string, size int) string {
	var b strings.Builder
	b.WriteString(header + "write_files:\n")
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "- path: /etc/kubernetes/pki/file-%d.crt\n  owner: root:root\n  permissions: '0640'\n  content: |\n", i)
		for range 20 {
			b.WriteString("    MIIDBTCCAe2gAwIBAgIIWq3ohaZ5kRcwDQYJKoZIhvcNAQELBQAwFTETMBEGA1UEAxMKa3ViZXJuZXRlczAe\n")
		}
	}
	b.WriteString("runcmd:\n- kubeadm init --config /run/kubeadm/kubeadm.yaml && echo success > /run/cluster-api/bootstrap-success.complete\n")
	return b.String()
}

// TestCreateVMUserDataInBody: a VM's user data, tens of KiB for a control plane, travels in
// the create call's body, so the request line stays far below what front ends accept (the
// simulator answers 414 above 8 KiB, as they do), and the VM gets the same user data. (Today's
// HEAD, 4d97e0c, sent it in the query string: a 40 KiB request line.)
func TestCreateVMUserDataInBody(t *testing.T) {
	e := newEnv(t, vcosim.Options{})
	cs := e.cloudspace("capvco_ns_ud_primary", loc)
	img := e.image(loc)
	multipart := "Content-Type: multipart/mixed; boundary=\"b\"\nMIME-Version: 1.0\n\n--b\nContent-Type: text/cloud-config\n\n" +
		bigCloudConfig("#cloud-config\n", 20<<10) + "\n--b\nContent-Type: text/x-shellscript\n\n#!/bin/sh\necho driver\n--b--\n"
	for _, tc := range []struct {
		name, userData string
		object         bool // stored as the cloud-config the platform writes from the body's object
	}{
		{"cloud-config", bigCloudConfig("#cloud-config\n", 40<<10), true},
		{"kubeadm's jinja header, no markup", bigCloudConfig("## template: jinja\n#cloud-config\n", 40<<10), true},
		{"jinja markup", bigCloudConfig("## template: jinja\n#cloud-config\nhostname: '{{ ds.meta_data.local_hostname }}'\n", 40<<10), false},
		{"multipart", multipart, false},
		{"script", "#!/bin/sh\n" + strings.Repeat("echo 0123456789abcdef0123456789abcdef\n", 1000), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "ud-" + strings.ReplaceAll(strings.ReplaceAll(tc.name, " ", "-"), "'", "")
			id, err := e.cluster.CreateVM(e.ctx, cs.ID, vco.CreateVMRequest{Name: name, VCPUs: 2, MemoryMiB: 2048, ImageID: img, UserData: tc.userData})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			for _, ex := range e.rec.Exchanges() {
				if line := ex.Method + " " + ex.Path + "?" + ex.Query.Encode() + " HTTP/1.1"; len(line) > 4<<10 {
					t.Fatalf("%s %s: a request line of %d bytes (front ends refuse over 4-8 KiB)", ex.Method, ex.Path, len(line))
				}
				if ex.Query.Has("user_data") {
					t.Fatalf("%s %s: user_data in the query string", ex.Method, ex.Path)
				}
			}
			var got string
			for _, vm := range e.sim.Snapshot().VMs {
				if vm.ID == id {
					got = vm.UserData
				}
			}
			if !tc.object {
				if got != tc.userData {
					t.Fatalf("user data changed on the way: %d bytes in, %d stored", len(tc.userData), len(got))
				}
				return
			}
			_, body, _ := strings.Cut(strings.TrimPrefix(tc.userData, "## template: jinja\n"), "\n")
			var want, have any
			if err := yaml.Unmarshal([]byte(body), &want); err != nil {
				t.Fatal(err)
			}
			rest, ok := strings.CutPrefix(got, "#cloud-config\n")
			if err := yaml.Unmarshal([]byte(rest), &have); !ok || err != nil || !reflect.DeepEqual(want, have) {
				t.Fatalf("the VM's cloud-config differs from the bootstrap data (%v): %.200q", err, got)
			}
		})
	}
}

// TestSimulatorRefusesLongRequestLines: like the platform's front ends, the simulator answers
// a request line over 8 KiB with 414 and a page, before the API (or its authentication) sees
// it; the client reports the status without the page.
func TestSimulatorRefusesLongRequestLines(t *testing.T) {
	e := newEnv(t, vcosim.Options{})
	cs := e.cloudspace("capvco_ns_414_primary", loc)
	q := url.Values{"name": {"long"}, "description": {strings.Repeat("d", 9<<10)}, "vcpus": {"1"}, "memory": {"1024"}}
	req, err := http.NewRequest(http.MethodPost, e.sim.APIURL()+"/customers/"+vcosim.SeedCustomer+"/cloudspaces/"+cs.ID+"/vms?"+q.Encode(), nil)
	e.must(err)
	resp, err := http.DefaultClient.Do(req) // no token: the front end answers first
	e.must(err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestURITooLong || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("got %d %s, want 414 text/html", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	_, err = e.cluster.CreateVM(e.ctx, cs.ID, vco.CreateVMRequest{Name: "long", Description: strings.Repeat("d", 9<<10), VCPUs: 1, MemoryMiB: 1024, ImageID: e.image(loc)})
	if err == nil || !strings.Contains(err.Error(), "414 Request URI Too Long") || strings.Contains(err.Error(), "<html") {
		t.Fatalf("want the 414 without its page, got %v", err)
	}
	for _, vm := range e.sim.Snapshot().VMs {
		if vm.Name == "long" {
			t.Fatal("the API created the VM of a refused request")
		}
	}
}
