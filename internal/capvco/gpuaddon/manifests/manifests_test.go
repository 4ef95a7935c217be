package manifests

import (
	"context"
	"os"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/runtime"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/capvco/gpuaddon"
	"github.com/capx-io/capx/internal/manifest"
	"github.com/capx-io/capx/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, testenv.Options{}, &env)) }

// TestNVIDIAApply applies the nvidia add-on to a real API server: the device plugin runs where
// a GPU machine's node is labelled, tolerates the GPU taint, and the RuntimeClass names the
// handler the driver script installs and schedules onto those nodes.
func TestNVIDIAApply(t *testing.T) {
	stream, err := Render(Options{Addon: gpuaddon.NVIDIA})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Objects(stream)
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	var rc nodev1.RuntimeClass
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		var into any
		switch o.GetKind() {
		case "DaemonSet":
			into = &ds
		case "RuntimeClass":
			into = &rc
		default:
			t.Errorf("unexpected %s", o.GetKind())
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
			t.Fatal(err)
		}
	}
	labels := gpuaddon.NodeLabels(gpuaddon.NVIDIA, &capvcov1.GPUSpec{Vendor: "nvidia", Count: 1})
	spec := ds.Spec.Template.Spec
	if len(labels) != 1 || spec.NodeSelector[gpuaddon.AcceleratorLabel] != labels[gpuaddon.AcceleratorLabel] || len(spec.NodeSelector) != 1 {
		t.Errorf("device plugin nodeSelector %v, GPU nodes are labelled %v", spec.NodeSelector, labels)
	}
	if spec.Containers[0].Image != DefaultDevicePluginImage || spec.Volumes[0].HostPath.Path != "/var/lib/kubelet/device-plugins" {
		t.Errorf("device plugin container %+v volumes %+v", spec.Containers[0], spec.Volumes)
	}
	if spec.Tolerations[0].Key != gpuaddon.ResourceName {
		t.Errorf("tolerations %+v", spec.Tolerations)
	}
	if rc.Handler != "nvidia" || rc.Scheduling.NodeSelector[gpuaddon.AcceleratorLabel] != "nvidia" || spec.RuntimeClassName == nil || *spec.RuntimeClassName != rc.Name {
		t.Errorf("RuntimeClass %+v, plugin's %v", rc, spec.RuntimeClassName)
	}
}

// TestNoneRendersNothing: the stub-profile case deploys no device plugin and labels no node.
func TestNoneRendersNothing(t *testing.T) {
	stream, err := Render(Options{Addon: gpuaddon.None})
	if err != nil || len(stream) != 0 {
		t.Fatalf("none rendered %q, %v", stream, err)
	}
	if l := gpuaddon.NodeLabels(gpuaddon.None, &capvcov1.GPUSpec{Vendor: "nvidia"}); l != nil {
		t.Errorf("none labels nodes: %v", l)
	}
	if _, err := Render(Options{Addon: "amd"}); err == nil {
		t.Error("an unknown add-on rendered")
	}
}

// TestScaleFromZeroAgrees: the resource a GPU pool publishes for scale from zero is the one the
// device plugin advertises, so a Pod asking for it fits the autoscaler's template node and the
// real node alike.
func TestScaleFromZeroAgrees(t *testing.T) {
	ann, reason, msg := decide.Capacity(capvcov1.VCOMachineSpec{VCPUs: 8, MemoryMiB: 32768, GPU: &capvcov1.GPUSpec{Vendor: "nvidia", Count: 2}}, gpuaddon.NVIDIA)
	if ann[decide.CapacityGPUType] != gpuaddon.ResourceName || ann[decide.CapacityGPU] != "2" {
		t.Fatalf("published capacity %v (%s: %s), the device plugin advertises %s", ann, reason, msg, gpuaddon.ResourceName)
	}
}
