// Package gpuaddon is the GPU add-on of CAPVCO workload clusters: which one a cluster gets
// (VCO_GPU_ADDON: nvidia, the default, or none) and, for nvidia, the manifests that make the
// GPUs of its GPU workers schedulable: NVIDIA's device plugin DaemonSet on the nodes labelled
// cluster-api/accelerator, and the RuntimeClass of the containerd runtime that
// spec.gpu.driverVersion's first-boot script installs.
//
// The device plugin advertises ResourceName, the resource scale-from-zero capacity names, on
// exactly the nodes NodeLabels labels (Resource says which machines those are).
package gpuaddon

import (
	"fmt"
	"strings"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
)

// EnvVar selects the add-on, as the original provider's docs name it.
const EnvVar = "VCO_GPU_ADDON"

// Addon is which GPU add-on a cluster gets.
type Addon string

const (
	// NVIDIA deploys NVIDIA's device plugin and the nvidia RuntimeClass.
	NVIDIA Addon = "nvidia"
	// None deploys nothing: the stub-profile case, where a vGPU attaches but no driver can run.
	None Addon = "none"
)

// Parse reads VCO_GPU_ADDON's value; empty is nvidia.
func Parse(v string) (Addon, error) {
	switch a := Addon(strings.ToLower(strings.TrimSpace(v))); a {
	case "":
		return NVIDIA, nil
	case NVIDIA, None:
		return a, nil
	}
	return "", fmt.Errorf("%s=%q: use nvidia (NVIDIA's device plugin) or none (no GPU add-on, for stub GPU profiles)", EnvVar, v)
}

// Of is the add-on a cluster gets: spec.addons.gpu.addon (empty is nvidia), or None when
// spec.addons.gpu is not set, since then nothing is installed.
func Of(spec capvcov1.VCOClusterSpec) (Addon, error) {
	if spec.Addons.GPU == nil {
		return None, nil
	}
	a, err := Parse(spec.Addons.GPU.Addon)
	if err != nil {
		return "", fmt.Errorf("spec.addons.gpu.addon: %w", err)
	}
	return a, nil
}

// AcceleratorLabel is the node label cluster-autoscaler's Cluster API provider reads as "this
// node has a GPU"; the device plugin runs on the nodes that carry it.
const AcceleratorLabel = "cluster-api/accelerator"

// ResourceName is the extended resource NVIDIA's device plugin advertises, and so the one a
// GPU pool's scale-from-zero capacity (VCOMachineTemplate status.capacity, the gpu-type
// annotation) names: one constant, so the autoscaler's template node and a real node agree.
// It is untyped: it serves as a string and as a corev1.ResourceName.
const ResourceName = "nvidia.com/gpu"

// Resource is the extended resource a machine's GPUs are advertised under in a cluster with
// add-on a, or "" when no device plugin advertises them (add-on none, a pinned profile, which
// names no vendor, or a vendor whose plugin does not ship): scale-from-zero capacity that
// counts a GPU under any other name promises the autoscaler a node that never appears.
func Resource(a Addon, gpu *capvcov1.GPUSpec) string {
	if !advertised(a, gpu) {
		return ""
	}
	return ResourceName
}

// advertised says whether the nvidia device plugin runs on a machine's node and counts its GPUs.
func advertised(a Addon, gpu *capvcov1.GPUSpec) bool {
	return a == NVIDIA && gpu != nil && strings.EqualFold(gpu.Vendor, "nvidia")
}

// RuntimeClassName and RuntimeHandler name the containerd runtime the driver script installs
// (nvidia-ctk runtime configure --runtime=containerd --set-as-default: handler "nvidia").
const (
	RuntimeClassName = "nvidia"
	RuntimeHandler   = "nvidia"
)

// NodeLabels are the labels a machine's node joins with (kubelet --node-labels in its
// bootstrap configuration), so the device plugin lands on it before the autoscaler counts it:
// the accelerator label for a vendor GPU under the nvidia add-on, nothing otherwise.
func NodeLabels(a Addon, gpu *capvcov1.GPUSpec) map[string]string {
	if !advertised(a, gpu) {
		return nil
	}
	return map[string]string{AcceleratorLabel: "nvidia"}
}
