package gpuaddon

import (
	"testing"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]Addon{"": NVIDIA, "nvidia": NVIDIA, " NVIDIA ": NVIDIA, "none": None} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := Parse("amd"); err == nil {
		t.Error("amd accepted")
	}
}

func TestNodeLabels(t *testing.T) {
	nv := &capvcov1.GPUSpec{Vendor: "nvidia"}
	if l := NodeLabels(NVIDIA, nv); l[AcceleratorLabel] != "nvidia" {
		t.Errorf("nvidia GPU: %v", l)
	}
	if r := Resource(NVIDIA, &capvcov1.GPUSpec{Vendor: "NVIDIA", Count: 2}); r != ResourceName {
		t.Errorf("nvidia GPU advertised as %q", r)
	}
	for name, l := range map[string]map[string]string{
		"no GPU":         NodeLabels(NVIDIA, nil),
		"pinned profile": NodeLabels(NVIDIA, &capvcov1.GPUSpec{ProfileID: "p"}),
		"other vendor":   NodeLabels(NVIDIA, &capvcov1.GPUSpec{Vendor: "amd"}),
		"add-on none":    NodeLabels(None, nv),
	} {
		if l != nil {
			t.Errorf("%s: labelled %v", name, l)
		}
	}
	// Every machine the device plugin does not run on advertises no GPU resource.
	for name, r := range map[string]string{
		"no GPU":         Resource(NVIDIA, nil),
		"pinned profile": Resource(NVIDIA, &capvcov1.GPUSpec{ProfileID: "p"}),
		"other vendor":   Resource(NVIDIA, &capvcov1.GPUSpec{Vendor: "amd"}),
		"add-on none":    Resource(None, nv),
	} {
		if r != "" {
			t.Errorf("%s: advertised as %q", name, r)
		}
	}
}
