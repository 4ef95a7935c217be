// Package manifests renders the GPU add-on a workload cluster gets: for nvidia, the nvidia
// RuntimeClass and NVIDIA's device plugin DaemonSet on the nodes gpuaddon.NodeLabels labels;
// for none, nothing.
package manifests

import (
	"bytes"
	_ "embed"
	"errors"
	"text/template"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/gpuaddon"
)

//go:embed nvidia.yaml.tmpl
var tmpl string

// DefaultDevicePluginImage is NVIDIA's device plugin release the add-on deploys unless told
// otherwise; air-gapped clusters mirror it and set Options.DevicePluginImage.
const DefaultDevicePluginImage = "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"

// nvidiaGPU is any NVIDIA GPU machine: the device plugin selects the nodes gpuaddon.NodeLabels
// labels for it.
var nvidiaGPU = &capvcov1.GPUSpec{Vendor: "nvidia"}

// Options are what differs between clusters.
type Options struct {
	Addon gpuaddon.Addon
	// DevicePluginImage defaults to DefaultDevicePluginImage.
	DevicePluginImage string
}

// Render returns the add-on's manifests as one multi-document YAML stream (empty for none).
func Render(o Options) ([]byte, error) {
	switch o.Addon {
	case gpuaddon.None:
		return nil, nil
	case gpuaddon.NVIDIA:
	default:
		_, err := gpuaddon.Parse(string(o.Addon))
		return nil, errors.Join(errors.New("manifests: unknown GPU add-on"), err)
	}
	if o.DevicePluginImage == "" {
		o.DevicePluginImage = DefaultDevicePluginImage
	}
	labels := gpuaddon.NodeLabels(gpuaddon.NVIDIA, nvidiaGPU)
	t, err := template.New("nvidia").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err = t.Execute(&b, map[string]any{"Image": o.DevicePluginImage, "RuntimeClass": gpuaddon.RuntimeClassName,
		"Handler": gpuaddon.RuntimeHandler, "Label": gpuaddon.AcceleratorLabel, "LabelValue": labels[gpuaddon.AcceleratorLabel],
		"Resource": gpuaddon.ResourceName})
	return b.Bytes(), err
}
