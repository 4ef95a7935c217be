package instances

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/internal/vco/vcotest"
)

func TestAddresses(t *testing.T) {
	for _, tc := range []struct {
		name string
		vm   vco.VM
		want []corev1.NodeAddress
	}{
		{"internal and hostname", vco.VM{Name: "m0", Hostname: "m0.local", NICs: []vco.NIC{{IP: "192.168.103.5", Type: "INTERNAL"}}},
			[]corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.103.5"}, {Type: corev1.NodeHostName, Address: "m0.local"}}},
		{"list model has no type: internal", vco.VM{Name: "m0", NICs: []vco.NIC{{IP: "192.168.103.5"}}},
			[]corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.103.5"}, {Type: corev1.NodeHostName, Address: "m0"}}},
		{"external nic", vco.VM{Name: "m0", NICs: []vco.NIC{{IP: "192.168.103.5"}, {IP: "203.0.113.9", Type: "external"}, {IP: ""}}},
			[]corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.103.5"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.9"}, {Type: corev1.NodeHostName, Address: "m0"}}},
		{"duplicate nic", vco.VM{Name: "m0", NICs: []vco.NIC{{IP: "10.0.0.1"}, {IP: "10.0.0.1"}}},
			[]corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: "m0"}}},
		{"nothing", vco.VM{}, nil},
	} {
		if got := Addresses(tc.vm); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Addresses = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestInstanceTypeAndStatus(t *testing.T) {
	if got := InstanceType(vco.VM{VCPUs: 4, MemoryMiB: 8192}); got != "4vcpu-8192mib" {
		t.Errorf("InstanceType = %q", got)
	}
	if got := InstanceType(vco.VM{VCPUs: 4}); got != "" {
		t.Errorf("InstanceType without memory = %q", got)
	}
	for status, want := range map[string][2]bool{
		"RUNNING": {false, false}, "HALTED": {true, false}, "halted": {true, false}, "DELETED": {false, true},
		"DESTROYED": {false, true}, "PAUSED": {false, false}, "ERROR": {false, false}, "": {false, false},
	} {
		v := vco.VM{Status: status}
		if Shutdown(v) != want[0] || Gone(v) != want[1] {
			t.Errorf("%q: Shutdown=%v Gone=%v, want %v", status, Shutdown(v), Gone(v), want)
		}
	}
}

func TestMetadata(t *testing.T) {
	f := Found{Site: Site{Name: "west", Location: "be-mac-dc01-001", CloudspaceID: "cs-2"},
		VM: vco.VM{ID: 42, Name: "w0", VCPUs: 2, MemoryMiB: 4096, NICs: []vco.NIC{{IP: "192.168.104.7"}}}}
	m := Metadata(f)
	if m.ProviderID != "vco://be-mac-dc01-001/42" || m.Zone != "west" || m.Region != "be-mac-dc01-001" || m.InstanceType != "2vcpu-4096mib" {
		t.Errorf("Metadata = %+v", m)
	}
	// The provider ID must be exactly what CAPVCO puts on the VCOMachine, or CAPI never
	// matches the Node to its Machine.
	if m.ProviderID != names.ProviderID(f.Site.Location, f.VM.ID) {
		t.Errorf("provider ID %q differs from CAPVCO's", m.ProviderID)
	}
}

func TestSitesIn(t *testing.T) {
	sites := []Site{{Name: "primary", Location: "a"}, {Name: "b1", Location: "b"}, {Name: "a2", Location: "a"}}
	if got := SitesIn(sites, "a"); len(got) != 2 || got[1].Name != "a2" {
		t.Errorf("SitesIn = %v", got)
	}
}

// world is a simulator with two sites of a cluster, each with one VM.
type world struct {
	sim   *vcosim.Server
	api   *vco.Client
	sites []Site
	vms   []vco.VM
}

func newWorld(t *testing.T) *world {
	t.Helper()
	sim := vcosim.NewTestServer(t, vcosim.Options{})
	api := vcotest.Client(t, sim, vcosim.SeedClusterPrinc)
	ctx := context.Background()
	w := &world{sim: sim, api: api}
	img, err := api.FindImage(ctx, vcosim.SeedLocation, vcosim.SeedImageName)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []Site{{Name: "primary", Location: vcosim.SeedLocation}, {Name: "second", Location: vcosim.SeedLocation}} {
		cs, _, err := api.EnsureCloudspace(ctx, vco.CreateCloudspaceRequest{Name: names.Cloudspace("ns", "c", s.Name), Location: s.Location,
			PrivateNetwork: []string{"192.168.103.0/24", "192.168.104.0/24"}[i]})
		if err != nil {
			t.Fatal(err)
		}
		s.CloudspaceID = cs.ID
		w.sites = append(w.sites, s)
		v, _, err := api.EnsureVM(ctx, cs.ID, vco.CreateVMRequest{Name: []string{"cp-0", "w-0"}[i], Hostname: []string{"cp-0", "w-0"}[i], VCPUs: 2, MemoryMiB: 2048, ImageID: img.ID})
		if err != nil {
			t.Fatal(err)
		}
		w.vms = append(w.vms, v)
	}
	return w
}

func TestLocate(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	node := func(name, pid string) *corev1.Node {
		n := &corev1.Node{Spec: corev1.NodeSpec{ProviderID: pid}}
		n.Name = name
		return n
	}
	// By name, in the second site of the same location.
	f, err := Locate(ctx, w.api, w.sites, node("w-0", ""))
	if err != nil || f.VM.ID != w.vms[1].ID || f.Site.Name != "second" || f.VM.PrivateIP() == "" {
		t.Fatalf("by name: %+v, %v", f, err)
	}
	// By provider ID: the location holds two sites, the VM is in the second.
	pid := names.ProviderID(vcosim.SeedLocation, w.vms[1].ID)
	f, err = Locate(ctx, w.api, w.sites, node("renamed", pid))
	if err != nil || f.VM.ID != w.vms[1].ID || f.Site.Name != "second" {
		t.Fatalf("by provider ID: %+v, %v", f, err)
	}
	// Not ours: never "not found".
	for _, bad := range []string{"aws:///eu-west-1a/i-1", "vco://" + vcosim.SeedLocation2 + "/1", "vco://x/abc"} {
		if _, err := Locate(ctx, w.api, w.sites, node("x", bad)); err == nil || errors.Is(err, cloudprovider.InstanceNotFound) {
			t.Errorf("%s: %v, want an error that is not InstanceNotFound", bad, err)
		}
	}
	// An unknown name is not found.
	if _, err := Locate(ctx, w.api, w.sites, node("nobody", "")); !errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Errorf("unknown name: %v", err)
	}
	// Deleted out of band: not found, by either key.
	if err := w.api.DeleteVM(ctx, w.sites[1].CloudspaceID, w.vms[1].ID, vco.DeleteVMOptions{Permanently: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := Locate(ctx, w.api, w.sites, node("w-0", pid)); !errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Errorf("deleted VM by provider ID: %v", err)
	}
	if _, err := Locate(ctx, w.api, w.sites, node("w-0", "")); !errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Errorf("deleted VM by name: %v", err)
	}
	// A soft-deleted VM (recycle bin) is gone too.
	if err := w.api.DeleteVM(ctx, w.sites[0].CloudspaceID, w.vms[0].ID, vco.DeleteVMOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Locate(ctx, w.api, w.sites, node("cp-0", names.ProviderID(vcosim.SeedLocation, w.vms[0].ID))); !errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Errorf("soft-deleted VM: %v", err)
	}
}

func TestLocateRefusesWhenACloudspaceIsUnreadable(t *testing.T) {
	w := newWorld(t)
	sites := []Site{w.sites[0], {Name: "second", Location: vcosim.SeedLocation, CloudspaceID: "cs-does-not-exist"}}
	pid := names.ProviderID(vcosim.SeedLocation, 999999)
	_, err := ByProviderID(context.Background(), w.api, sites, pid)
	if err == nil || errors.Is(err, cloudprovider.InstanceNotFound) || !strings.Contains(err.Error(), "refusing") {
		t.Fatalf("err = %v: a cloudspace that cannot be read must not make a Node look deleted", err)
	}
	if _, err := ByName(context.Background(), w.api, sites, "nobody"); err == nil || errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Fatalf("by name: %v", err)
	}
}

func TestLocateAmbiguousName(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	img, _ := w.api.FindImage(ctx, vcosim.SeedLocation, vcosim.SeedImageName)
	if _, err := w.api.CreateVM(ctx, w.sites[0].CloudspaceID, vco.CreateVMRequest{Name: "w-0", VCPUs: 1, MemoryMiB: 1024, ImageID: img.ID}); err != nil {
		t.Fatal(err)
	}
	_, err := ByName(ctx, w.api, w.sites, "w-0")
	if err == nil || errors.Is(err, cloudprovider.InstanceNotFound) || !strings.Contains(err.Error(), "2 VMs") {
		t.Fatalf("err = %v", err)
	}
}
