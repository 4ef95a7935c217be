package addons

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/capx-io/capx/internal/capvco/gpuaddon"
	gpumanifests "github.com/capx-io/capx/internal/capvco/gpuaddon/manifests"
)

// devicePluginComponent names NVIDIA's device plugin image for --capvco-addon-image.
const devicePluginComponent = "nvidia-device-plugin"

// GPU is the GPU add-on, in clusters that set spec.addons.gpu: for nvidia, NVIDIA's device
// plugin on the nodes labelled cluster-api/accelerator=nvidia and the nvidia RuntimeClass;
// for none, nothing. Unset or none, what an earlier pass applied is removed.
type GPU struct{}

// Name implements Addon.
func (GPU) Name() string { return "gpu" }

// Render implements Addon.
func (GPU) Render(s Settings) (Rendered, error) {
	a, err := gpuaddon.Of(s.VCOCluster.Spec)
	if err != nil {
		return Rendered{}, err
	}
	if a == gpuaddon.None {
		why := "spec.addons.gpu.addon is none"
		if s.VCOCluster.Spec.Addons.GPU == nil {
			why = "spec.addons.gpu is not set"
		}
		return Rendered{Skip: why + ": no device plugin, so GPU machines' GPUs are not schedulable", Remove: gpuKinds}, nil
	}
	objs, err := gpuObjects(s.ThirdPartyImage(devicePluginComponent, gpumanifests.DefaultDevicePluginImage))
	if err != nil {
		return Rendered{}, err
	}
	return Rendered{Objects: objs}, nil
}

// gpuKinds are the kinds the nvidia add-on applies.
var gpuKinds = mustKinds(gpuObjects(gpumanifests.DefaultDevicePluginImage))

func gpuObjects(image string) ([]*unstructured.Unstructured, error) {
	return renderedObjects(gpumanifests.Render(gpumanifests.Options{Addon: gpuaddon.NVIDIA, DevicePluginImage: image}))
}
