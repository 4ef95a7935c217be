package controllers_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/capvco/userdata"
)

// TestGPUDriverVersionInUserData: a GPU machine with spec.gpu.driverVersion boots with its
// bootstrap data and the driver install as one multipart user_data; a driver version that is
// not a branch is a clear VMReady=False and creates no VM; a machine without it gets its
// bootstrap data unchanged.
func TestGPUDriverVersionInUserData(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	g := NewWithT(t)
	_, vc := h.cluster("gpu", nil)
	waitFor(h, vc, time.Minute, "provisioned", provisionedCluster)
	gpu := func(version string) func(*capvcov1.VCOMachine, *clusterv1.Machine) {
		return func(m *capvcov1.VCOMachine, _ *clusterv1.Machine) {
			m.Spec.GPU = &capvcov1.GPUSpec{Vendor: "nvidia", Count: 1, DriverVersion: version}
		}
	}
	withDriver := h.machine("gpu", "gpu-0", false, gpu("550"))
	bad := h.machine("gpu", "gpu-1", false, gpu("550.127.05"))
	plain := h.machine("gpu", "md-0", false, nil)

	waitFor(h, withDriver, time.Minute, "provisioned", provisionedMachine)
	waitFor(h, plain, time.Minute, "provisioned", provisionedMachine)
	waitFor(h, bad, 30*time.Second, "BootstrapDataUnsupported", func(m *capvcov1.VCOMachine) bool {
		c := conditions.Get(m, capvcov1.VMReadyCondition)
		return c != nil && c.Status == "False" && c.Reason == capvcov1.BootstrapDataUnsupportedReason &&
			strings.Contains(c.Message, `spec.gpu.driverVersion "550.127.05": want an NVIDIA driver branch such as "550"`)
	})
	g.Expect(conditions.IsFalse(bad, capvcov1.ReadyCondition)).To(BeTrue())

	userData := map[string]string{}
	for _, vm := range h.sim.Snapshot().VMs {
		userData[vm.Name] = vm.UserData
	}
	g.Expect(userData).NotTo(HaveKey(names.VM("gpu-1")), "no VM for a driver version that is not a branch")
	g.Expect(userData[names.VM("md-0")]).To(Equal("#cloud-config\nhostname: md-0\n"), "a machine without a driver keeps its bootstrap data")
	want, err := userdata.Build([]byte("#cloud-config\nhostname: gpu-0\n"), "cloud-config", withDriver.Spec.GPU)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(userData[names.VM("gpu-0")]).To(Equal(string(want)), "the GPU machine's user_data carries the driver part")
	g.Expect(userData[names.VM("gpu-0")]).To(ContainSubstring(`ubuntu-drivers install --gpgpu "nvidia:550-server"`))
}
