package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/capvco/gpuaddon"
)

// TestTemplateCapacityFollowsTheGPUAddon: a GPU template of a cluster without the GPU add-on
// publishes no GPU (no device plugin would advertise it) and says so; once the cluster's
// spec.addons.gpu asks for nvidia, the template publishes the device plugin's resource.
func TestTemplateCapacityFollowsTheGPUAddon(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	_, vc := h.cluster("gpus", nil)
	img := int64(1)
	tmpl := &capvcov1.VCOMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "gpu-pool",
		Labels: map[string]string{clusterv1.ClusterNameLabel: "gpus"}}}
	tmpl.Spec.Template.Spec = capvcov1.VCOMachineSpec{Image: capvcov1.ImageSpec{ID: &img}, VCPUs: 8, MemoryMiB: 65536, BootDiskGiB: 50,
		GPU: &capvcov1.GPUSpec{Vendor: "nvidia", Count: 2}}
	h.create(tmpl)
	waitFor(h, tmpl, 30*time.Second, "no GPU add-on", func(o *capvcov1.VCOMachineTemplate) bool {
		c := conditions.Get(o, capvcov1.CapacityPublishedCondition)
		return c != nil && c.Reason == capvcov1.GPUAddonNotInstalledReason && o.Annotations[decide.CapacityGPUType] == "" &&
			len(o.Status.Capacity) > 0
	})
	NewWithT(t).Expect(tmpl.Status.Capacity).NotTo(HaveKey(BeEquivalentTo(gpuaddon.ResourceName)))

	NewWithT(t).Expect(h.get(vc)).To(Succeed())
	vc.Spec.Addons.GPU = &capvcov1.GPUAddonSpec{Addon: "nvidia"}
	NewWithT(t).Expect(env.Client.Update(context.Background(), vc)).To(Succeed())
	waitFor(h, tmpl, 30*time.Second, "the nvidia add-on's resource", func(o *capvcov1.VCOMachineTemplate) bool {
		q := o.Status.Capacity[gpuaddon.ResourceName]
		return conditions.IsTrue(o, capvcov1.CapacityPublishedCondition) && o.Annotations[decide.CapacityGPUType] == gpuaddon.ResourceName &&
			o.Annotations[decide.CapacityGPU] == "2" && q.Value() == 2
	})
}
