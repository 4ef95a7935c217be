package decide

import (
	"maps"
	"reflect"
	"strings"
	"testing"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/gpuaddon"
	"github.com/capx-io/capx/internal/vco"
)

func TestSites(t *testing.T) {
	spec := capvcov1.VCOClusterSpec{Location: "l1", Geo: &capvcov1.GeoSpec{
		Sites:          []capvcov1.GeoSite{{Name: "b", Location: "l2"}, {Name: "c", Location: "l2", PrivateNetwork: "192.168.104.0/24"}},
		LocationImages: map[string]int64{"l3": 1},
	}}
	got := Sites(spec)
	want := []Site{{"primary", "l1", "192.168.103.0/24"}, {"b", "l2", "192.168.105.0/24"}, {"c", "l2", "192.168.104.0/24"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Sites = %+v, want %+v", got, want)
	}
	if m := MissingLocationImages(spec); !reflect.DeepEqual(m, []string{"l2"}) {
		t.Errorf("MissingLocationImages = %v", m)
	}
	if one := Sites(capvcov1.VCOClusterSpec{Location: "l1"}); len(one) != 1 || one[0].PrivateNetwork != "" {
		t.Errorf("single site = %+v (the platform default applies)", one)
	}
	if _, ok := ImageFor(spec, capvcov1.ImageSpec{Name: "u"}, "l2"); ok {
		t.Error("ImageFor found an image in l2")
	}
	if img, ok := ImageFor(spec, capvcov1.ImageSpec{Name: "u"}, "l1"); !ok || img.Name != "u" {
		t.Errorf("ImageFor primary = %+v %v", img, ok)
	}
	if img, ok := ImageFor(spec, capvcov1.ImageSpec{Name: "u"}, "l3"); !ok || *img.ID != 1 {
		t.Errorf("ImageFor l3 = %+v %v", img, ok)
	}
}

func TestPoolDelta(t *testing.T) {
	hosts := []vco.PoolHost{{ID: "1", Address: "10.0.0.1"}, {ID: "2", Address: "10.0.0.2"}, {ID: "3", Address: "10.0.0.1"}}
	add, remove := PoolDelta(hosts, []string{"10.0.0.1", "10.0.0.3"})
	if !reflect.DeepEqual(add, []string{"10.0.0.3"}) || len(remove) != 2 || remove[0].ID != "2" || remove[1].ID != "3" {
		t.Fatalf("PoolDelta = %v, %+v", add, remove)
	}
	if add, remove := PoolDelta(hosts[:1], []string{"10.0.0.1"}); len(add)+len(remove) != 0 {
		t.Errorf("steady state changes: %v %v", add, remove)
	}
}

func TestProbeSet(t *testing.T) {
	hosts := []vco.PoolHost{{Address: "10.0.0.1"}, {Address: "10.0.0.9"}, {Address: "10.0.0.2"}}
	got := ProbeSet([]string{"10.0.0.3", "10.0.0.1"}, []string{"10.0.0.2"}, hosts)
	if want := []string{"10.0.0.1", "10.0.0.3", "10.0.0.9"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ProbeSet = %v, want %v (a leaving machine is not probed; an unreported member is)", got, want)
	}
}

func TestGPUProfile(t *testing.T) {
	offered := []vco.GPUProfile{{ID: "z", Vendor: "NVIDIA", AvailableInstances: 1}, {ID: "a", Vendor: "NVIDIA"}, {ID: "m", Vendor: "NVIDIA", AvailableInstances: 3}}
	if p, err := GPUProfile(capvcov1.GPUSpec{Vendor: "nvidia"}, offered); err != nil || p != "m" {
		t.Errorf("vendor pick = %q, %v", p, err)
	}
	if p, err := GPUProfile(capvcov1.GPUSpec{ProfileID: "a"}, offered); err != nil || p != "a" {
		t.Errorf("pinned = %q, %v", p, err)
	}
	if _, err := GPUProfile(capvcov1.GPUSpec{Vendor: "amd"}, offered); err == nil {
		t.Error("amd found")
	}
	if _, err := GPUProfile(capvcov1.GPUSpec{ProfileID: "x"}, offered); err == nil {
		t.Error("unknown pinned profile found")
	}
}

// TestCapacity: the published GPU resource is the one the cluster's GPU add-on advertises
// (gpuaddon.Resource), so the autoscaler's template node and a real node agree; every GPU left
// out says why.
func TestCapacity(t *testing.T) {
	base := capvcov1.VCOMachineSpec{VCPUs: 8, MemoryMiB: 32768}
	for _, tc := range []struct {
		gpu     *capvcov1.GPUSpec
		addon   gpuaddon.Addon
		reason  string
		gpuType string
		count   string
	}{
		{nil, gpuaddon.NVIDIA, capvcov1.CapacityPublishedReason, "", ""},
		{nil, gpuaddon.None, capvcov1.CapacityPublishedReason, "", ""},
		{&capvcov1.GPUSpec{Vendor: "nvidia", Count: 2}, gpuaddon.NVIDIA, capvcov1.CapacityPublishedReason, gpuaddon.ResourceName, "2"},
		{&capvcov1.GPUSpec{Vendor: "NVIDIA"}, gpuaddon.NVIDIA, capvcov1.CapacityPublishedReason, gpuaddon.ResourceName, "1"},
		{&capvcov1.GPUSpec{Vendor: "nvidia", Count: 2}, gpuaddon.None, capvcov1.GPUAddonNotInstalledReason, "", ""},
		{&capvcov1.GPUSpec{ProfileID: "p"}, gpuaddon.NVIDIA, capvcov1.GPUProfilePinnedReason, "", ""},
		{&capvcov1.GPUSpec{Vendor: "amd"}, gpuaddon.NVIDIA, capvcov1.GPUVendorUnsupportedReason, "", ""},
	} {
		spec := base
		spec.GPU = tc.gpu
		ann, reason, msg := Capacity(spec, tc.addon)
		if tc.gpuType != "" && tc.gpuType != gpuaddon.Resource(tc.addon, tc.gpu) {
			t.Errorf("Capacity(%+v, %s) publishes %s, the device plugin advertises %q", tc.gpu, tc.addon, tc.gpuType, gpuaddon.Resource(tc.addon, tc.gpu))
		}
		if tc.reason == capvcov1.GPUAddonNotInstalledReason && !strings.Contains(msg, "spec.addons.gpu.addon to nvidia") {
			t.Errorf("add-on none: the message does not say what to do: %s", msg)
		}
		if reason != tc.reason || ann[CapacityGPUType] != tc.gpuType || ann[CapacityGPU] != tc.count ||
			ann[CapacityCPU] != "8" || ann[CapacityMemory] != "32Gi" {
			t.Errorf("Capacity(%+v, %s) = %v, %s", tc.gpu, tc.addon, ann, reason)
		}
		if (reason == capvcov1.CapacityPublishedReason) != (msg == "") {
			t.Errorf("Capacity(%+v) message %q with reason %s", tc.gpu, msg, reason)
		}
		if tc.reason == capvcov1.GPUProfilePinnedReason && !strings.Contains(msg, "gpu.vendor") {
			t.Errorf("pinned message does not say what to do: %s", msg)
		}
	}
	if GPUCount(nil) != 0 || GPUCount(&capvcov1.GPUSpec{Count: 3}) != 3 || GPUCount(&capvcov1.GPUSpec{}) != 1 {
		t.Error("GPUCount")
	}
}

func TestMeshPairs(t *testing.T) {
	if got := MeshPairs(3); !reflect.DeepEqual(got, [][2]int{{0, 1}, {0, 2}, {1, 2}}) {
		t.Errorf("MeshPairs(3) = %v", got)
	}
	if MeshPairs(1) != nil {
		t.Error("MeshPairs(1) not empty")
	}
}

// TestCapacityResources: status.capacity has cpu, memory, the boot disk as ephemeral storage and
// a shipping vendor's GPU resource; a pinned profile or an unsupported vendor is left out, as in
// the annotations.
func TestCapacityResources(t *testing.T) {
	base := capvcov1.VCOMachineSpec{VCPUs: 4, MemoryMiB: 8192, BootDiskGiB: 40}
	for _, tc := range []struct {
		gpu   *capvcov1.GPUSpec
		addon gpuaddon.Addon
		want  map[string]string
	}{
		{nil, gpuaddon.NVIDIA, map[string]string{"cpu": "4", "memory": "8Gi", "ephemeral-storage": "40Gi"}},
		{&capvcov1.GPUSpec{Vendor: "nvidia", Count: 2}, gpuaddon.NVIDIA, map[string]string{"cpu": "4", "memory": "8Gi", "ephemeral-storage": "40Gi", gpuaddon.ResourceName: "2"}},
		{&capvcov1.GPUSpec{Vendor: "nvidia", Count: 2}, gpuaddon.None, map[string]string{"cpu": "4", "memory": "8Gi", "ephemeral-storage": "40Gi"}},
		{&capvcov1.GPUSpec{Vendor: "nvidia", ProfileID: "p"}, gpuaddon.NVIDIA, map[string]string{"cpu": "4", "memory": "8Gi", "ephemeral-storage": "40Gi"}},
		{&capvcov1.GPUSpec{Vendor: "amd"}, gpuaddon.NVIDIA, map[string]string{"cpu": "4", "memory": "8Gi", "ephemeral-storage": "40Gi"}},
	} {
		spec := base
		spec.GPU = tc.gpu
		got := map[string]string{}
		for k, v := range CapacityResources(spec, tc.addon) {
			got[string(k)] = v.String()
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("CapacityResources(%+v) = %v, want %v", tc.gpu, got, tc.want)
		}
	}
}
