//go:build e2e

package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/test/e2e/install"
)

// TestSimulator runs the whitesky.cloud simulator in the management cluster and checks that
// the capx manager's pod reaches it with the credentials it printed:
//
//  1. vcosim runs as a Deployment behind a Service; the credentials Secret it printed is
//     applied to the cluster's namespace, naming the Service's address.
//  2. From inside the manager's pod (an ephemeral container shares its network), the API
//     answers 200 with the Secret's token and 401 with a forged one.
//  3. A CAPVCO cluster from the "vco-local" template referencing that Secret is taken over by
//     CAPVCO (finalizer, Ready condition) and deleted cleanly. CAPVCO provisions nothing yet;
//     the CAPVCO issue extends this suite with cloudspaces, VMs and teardown on the simulator.
func TestSimulator(t *testing.T) {
	const ns, name = "vco", "vco1"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	m := mgmtA(t)
	collectOnFailure(t, "simulator", m)
	g := NewWithT(t)
	k := shared.kit

	var sim *install.Simulator
	step(t, "deploy the simulator", func() {
		var err error
		sim, err = m.DeploySimulator(ctx, k.Images.VCOSim.Ref, ns)
		g.Expect(err).NotTo(HaveOccurred())
		secret := &corev1.Secret{}
		g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: install.SimulatorSecret}, secret)).To(Succeed())
		g.Expect(string(secret.Data["url"])).To(Equal(sim.URL + "/api/1"))
		g.Expect(string(secret.Data["customer"])).NotTo(BeEmpty())
		g.Expect(string(secret.Data["jwt"])).NotTo(BeEmpty())
	})

	step(t, "the manager's pod reaches the simulator", func() {
		// Run alone, right after the install, the manager's pod may still be starting.
		eventually(t, 2*time.Minute, func(g Gomega) {
			pod := managerPod(g, ctx, m)
			creds := sim.Credentials.StringData
			url := creds["url"] + "/customers/" + creds["customer"] + "/cloudspaces"
			out, err := m.ProbeFromPod(ctx, client.ObjectKeyFromObject(&pod), k.Images.HTTPGet.Ref, url, creds["jwt"])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(ContainSubstring("200 OK"))
			g.Expect(out).To(ContainSubstring(`"result"`))
			out, err = m.ProbeFromPod(ctx, client.ObjectKeyFromObject(&pod), k.Images.HTTPGet.Ref, url, "forged.token.value")
			g.Expect(err).To(HaveOccurred(), "a forged token is refused: %s", out)
			g.Expect(out).To(ContainSubstring("401"))
		}, "the simulator answered the manager's pod")
	})

	step(t, "a CAPVCO cluster is provisioned on the simulator and deleted", func() {
		// Cluster API's webhooks may not answer yet right after the install.
		eventually(t, 2*time.Minute, func(g Gomega) {
			_, err := m.ApplyCluster(ctx, k.Repository, install.ClusterSpec{Name: name, Namespace: ns, Flavor: install.FlavorVCOLocal})
			g.Expect(err).NotTo(HaveOccurred())
		}, "the vco-local cluster applied")
		eventually(t, 2*time.Minute, func(g Gomega) {
			vc := &capvcov1.VCOCluster{}
			g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vc)).To(Succeed())
			g.Expect(slices.Contains(vc.Finalizers, capvcov1.VCOClusterFinalizer)).To(BeTrue(), "finalizer")
			g.Expect(vc.Spec.CredentialsRef.Name).To(Equal(install.SimulatorSecret))
			g.Expect(vc.OwnerReferences).NotTo(BeEmpty(), "CAPI set the Cluster as owner")
			g.Expect(isTrue(vc.Status.Conditions, "Ready")).To(BeTrue(), "Ready: %v", vc.Status.Conditions)
		}, "the VCOCluster taken over")
		// The control plane, the worker and the GPU worker, as Cluster API sees them.
		g.Expect(m.WaitProvisioned(ctx, ns, name, 3*time.Minute)).To(Succeed())
		vms := &capvcov1.VCOMachineList{}
		g.Expect(m.Client.List(ctx, vms, client.InNamespace(ns))).To(Succeed())
		g.Expect(vms.Items).To(HaveLen(3))
		gpus := 0
		for _, vm := range vms.Items {
			g.Expect(vm.Spec.ProviderID).To(HavePrefix("vco://"))
			gpus += len(vm.Status.GPUs)
		}
		g.Expect(gpus).To(Equal(1), "the GPU worker's reservation")
		deleteCluster(t, ctx, m, ns, name)
		eventually(t, 2*time.Minute, func(g Gomega) {
			err := m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &capvcov1.VCOCluster{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		}, "the VCOCluster gone")
	})
}
