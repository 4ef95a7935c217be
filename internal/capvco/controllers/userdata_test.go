package controllers_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/gpuaddon"
	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/capvco/userdata"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// TestGPUDriverVersionInUserData: a GPU machine with spec.gpu.driverVersion boots with its
// bootstrap data and the driver install as one multipart user_data; bootstrap data that cannot
// carry it (Ignition) is a clear VMReady=False and creates no VM; a machine without it gets its
// bootstrap data unchanged.
func TestGPUDriverVersionInUserData(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	g := NewWithT(t)
	_, vc := h.cluster("gpu", func(vc *capvcov1.VCOCluster) { vc.Spec.Addons.GPU = &capvcov1.GPUAddonSpec{Addon: "nvidia"} })
	waitFor(h, vc, time.Minute, "provisioned", provisionedCluster)
	gpu := func(version string) func(*capvcov1.VCOMachine, *clusterv1.Machine) {
		return func(m *capvcov1.VCOMachine, _ *clusterv1.Machine) {
			m.Spec.GPU = &capvcov1.GPUSpec{Vendor: "nvidia", Count: 1, DriverVersion: version}
		}
	}
	withDriver := h.machine("gpu", "gpu-0", false, gpu("550"))
	plain := h.machine("gpu", "md-0", false, nil)
	// Ignition bootstrap data cannot carry the driver script. (A driver version that is not a
	// branch is refused by the CRD already; the controller refuses it too, for objects created
	// before that rule: userdata.TestBuildRefusesWhatItCannotMerge.)
	ignition := testenv.BootstrapSecret(h.ns, "gpu-1-bootstrap", "gpu", `{"ignition":{"version":"3.4.0"}}`)
	ignition.Data["format"] = []byte("ignition")
	h.create(ignition)
	m := testenv.Machine(h.ns, "gpu-1", "gpu", "VCOMachine", "gpu-1", "gpu-1-bootstrap")
	m.Spec.Version = "v1.36.3"
	h.create(m)
	bad := testenv.VCOMachine(h.ns, "gpu-1", "gpu", h.imageID(vcosim.SeedLocation))
	gpu("550")(bad, m)
	h.create(bad)

	waitFor(h, withDriver, time.Minute, "provisioned", provisionedMachine)
	waitFor(h, plain, time.Minute, "provisioned", provisionedMachine)
	waitFor(h, bad, 30*time.Second, "BootstrapDataUnsupported", func(m *capvcov1.VCOMachine) bool {
		c := conditions.Get(m, capvcov1.VMReadyCondition)
		return c != nil && c.Status == "False" && c.Reason == capvcov1.BootstrapDataUnsupportedReason &&
			strings.Contains(c.Message, `bootstrap data format "ignition" cannot carry the GPU driver install of spec.gpu.driverVersion`)
	})
	g.Expect(conditions.IsFalse(bad, capvcov1.ReadyCondition)).To(BeTrue())

	userData := map[string]string{}
	for _, vm := range h.sim.Snapshot().VMs {
		userData[vm.Name] = vm.UserData
	}
	g.Expect(userData).NotTo(HaveKey(names.VM("gpu-1")), "no VM for bootstrap data that cannot carry the driver")
	g.Expect(userData[names.VM("md-0")]).To(Equal("#cloud-config\nhostname: md-0\n"), "a machine without a driver keeps its bootstrap data")
	want, err := userdata.Build([]byte("#cloud-config\nhostname: gpu-0\n"), "cloud-config", withDriver.Spec.GPU,
		map[string]string{gpuaddon.AcceleratorLabel: "nvidia"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(userData[names.VM("gpu-0")]).To(Equal(string(want)), "the GPU machine's user_data carries the driver part")
	g.Expect(userData[names.VM("gpu-0")]).To(ContainSubstring(`ubuntu-drivers install --gpgpu "nvidia:550-server"`))
	g.Expect(userData[names.VM("gpu-0")]).To(ContainSubstring(`labels='cluster-api/accelerator=nvidia'`), "the GPU machine's node joins labelled for the nvidia add-on")
}
